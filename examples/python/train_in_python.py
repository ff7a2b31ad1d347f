# Unsupervised SimCSE in Python, then encode with the trained model. The corpus is one sentence a line
# (python -m hf_cse.download wiki1m writes SimCSE's 1M Wikipedia sentences to data/wiki1m_for_simcse.txt).
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig, SentenceEncoder, read_pairs

MODEL, TRAIN_FILE, OUTPUT_DIR = "bert-base-uncased", "data/wiki1m_for_simcse.txt", "outputs/simcse-python"
sentences = read_pairs(TRAIN_FILE)  # a "text" column; any train_file run_unsup.py reads (gensim:lee too)
model = CSEModel.from_pretrained(MODEL, pooling=PoolingConfig(pooler="cls"))
args = CSETrainingArguments(output_dir=OUTPUT_DIR, objective="simcse", temperature=0.05, max_steps=1000)
trainer = CSETrainer(
    model=model, args=args, processing_class=AutoTokenizer.from_pretrained(MODEL), train_dataset=sentences
)
trainer.train()
trainer.save_model()
trainer.create_model_card()  # README.md and hf_cse_training.json, as run_unsup.py writes them
embeddings = SentenceEncoder.from_pretrained(OUTPUT_DIR).encode(["A man plays a guitar.", "Someone plays music."])
