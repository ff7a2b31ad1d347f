# Load a trained run: with hf_cse, with sentence-transformers, or as a plain transformers encoder
from sentence_transformers import SentenceTransformer
from transformers import AutoModel

from hf_cse import SentenceEncoder

RUN = "outputs/simcse-minilm-wiki1m"  # the output folder (or the Hub repository it was pushed to)
sentences = ["A man plays a guitar.", "Someone plays an instrument."]

encoder = SentenceEncoder.from_pretrained(RUN)  # the saved pooler
embeddings = encoder.encode(sentences)

# sentence-transformers: the poolers it can express (cls, avg; not avg_top2, mask)
st_embeddings = SentenceTransformer(RUN).encode(sentences, convert_to_tensor=True)

encoder_model = AutoModel.from_pretrained(RUN)  # the trained encoder; then pool as the model card says
