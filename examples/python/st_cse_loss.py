from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss  # before v6: sentence_transformers.losses

from hf_cse.integrations import CSELoss

model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
# one text column: each sentence is its own positive under a second dropout mask (unsupervised SimCSE);
# or two columns, (anchor, positive) pairs
train_dataset = Dataset.from_dict({"text": ["A man plays a guitar.", "A dog runs in the park.", "..."]})

# DCLR; its frozen complementary model is the starting checkpoint, loaded again
complementary = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
loss = CSELoss(model, "dclr", complementary_model=complementary, temperature=0.05, phi=0.85)
loss = MatryoshkaLoss(model, loss, [384, 128, 64])  # optional, as around any loss

args = SentenceTransformerTrainingArguments(output_dir="outputs/dclr-st")  # its checkpoints (default: tmp_trainer/)
SentenceTransformerTrainer(model=model, args=args, train_dataset=train_dataset, loss=loss).train()
model.save_pretrained("outputs/dclr-st")  # its README.md cites DCLR (under CSELoss) and Matryoshka
