# Mine hard negatives for labelled pairs in Python: the rows python -m hf_cse.mine writes, as lists
from hf_cse import SentenceEncoder
from hf_cse.mining import mine_pairs

encoder = SentenceEncoder.from_pretrained("outputs/simcse-minilm-wiki1m")  # any encoder hf_cse loads
anchors = [
    "A man plays a guitar.",
    "A woman slices an onion.",
    "Kids play football in the park.",
    "A chef cooks pasta.",
    "A dog runs on the beach.",
]
positives = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Kids are playing football in a park.",
    "A chef is cooking pasta.",
    "A dog is running on a beach.",
]

# The corpus is the distinct positives; each anchor skips its own positive and those scored above
# margin x its positive's score (likely false negatives).
mined = mine_pairs(encoder, anchors, positives, num_negatives=1, margin=0.95)
for anchor, positive, negatives in zip(mined.anchors, mined.positives, mined.negatives, strict=True):
    print(f"{anchor} | {positive} | hard negative: {negatives[0]}")
print(f"The margin skipped {mined.skipped_by_margin} candidates.")
