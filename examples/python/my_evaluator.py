# my_evaluator.py: keep the checkpoint that answers your own FAQ best (any evaluator: encode -> named numbers)
import torch
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.evaluation import Evaluator

MODEL, OUTPUT_DIR = "sentence-transformers/all-MiniLM-L6-v2", "outputs/faq"


class NearestNeighbourAccuracy(Evaluator):
    """Share of questions whose nearest answer (cosine) is the right one."""

    name, primary_metric = "faq", "accuracy"  # greater_is_better defaults to True

    def __init__(self, questions: list[str], answers: list[str]):
        self.questions, self.answers = questions, answers  # answers[i] answers questions[i]

    def __call__(self, encode):
        q = torch.nn.functional.normalize(encode(self.questions), dim=-1)
        a = torch.nn.functional.normalize(encode(self.answers), dim=-1)
        nearest = (q @ a.T).argmax(dim=1)
        return {"accuracy": (nearest == torch.arange(len(q))).float().mean().item()}


questions = ["How do I reset my password?", "Where is my invoice?", "Can I change my plan?", "How do I leave?"]
answers = [
    "Use the link under the sign-in form.",
    "Invoices are listed under Billing.",
    "Plans change from the Subscription page.",
    "Delete your account in Settings.",
]
sentences = Dataset.from_dict({"text": questions + answers})  # your training corpus, one sentence a row
model = CSEModel.from_pretrained(MODEL, pooling=PoolingConfig(pooler="cls"))
tokenizer = AutoTokenizer.from_pretrained(MODEL)
args = CSETrainingArguments(
    output_dir=OUTPUT_DIR, max_steps=100, eval_strategy="steps", eval_steps=25,
    save_strategy="steps", save_steps=25, load_best_model_at_end=True,
)
trainer = CSETrainer(model=model, args=args, train_dataset=sentences, processing_class=tokenizer,
                     evaluator=NearestNeighbourAccuracy(questions, answers))  # selects on eval_accuracy
trainer.train()
trainer.save_model()
