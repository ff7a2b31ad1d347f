# Supervised SimCSE in Python: labelled pairs with a hard negative each (SimCSE's NLI triplets; python -m
# hf_cse.download nli writes them to data/nli_for_simcse.csv). read_pairs reads SimCSE's sent0,sent1,hard_neg or
# sentence-transformers' anchor,positive[,negative_1..negative_k]; a datasets.Dataset of either layout works too.
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig, SentenceEncoder, read_pairs

MODEL, TRAIN_FILE, OUTPUT_DIR = "bert-base-uncased", "data/nli_for_simcse.csv", "outputs/sup-simcse-python"
triplets = read_pairs(TRAIN_FILE)  # columns text (anchor), positive, negative_1
model = CSEModel.from_pretrained(MODEL, pooling=PoolingConfig(pooler="cls", mlp_only_train=False))
args = CSETrainingArguments(
    output_dir=OUTPUT_DIR, objective="simcse", temperature=0.05, per_device_train_batch_size=128,
    learning_rate=5e-5, max_steps=1000, objective_kwargs={"hard_negative_weight": 0.0},
)
trainer = CSETrainer(
    model=model, args=args, processing_class=AutoTokenizer.from_pretrained(MODEL), train_dataset=triplets
)
trainer.train()  # args.num_hard_negatives is now 1: the run records that its data were triplets
trainer.save_model()
trainer.create_model_card()
embeddings = SentenceEncoder.from_pretrained(OUTPUT_DIR).encode(["A man plays a guitar.", "Someone plays music."])
