# my_poolers.py   python run_unsup.py --import_module examples/python/my_poolers.py --pooler max_tokens ...
import torch

from hf_cse import Pooler, PoolerInputs, register_pooler


@register_pooler("max_tokens")
class MaxTokens(Pooler):
    sentence_transformers_mode = "max"  # sentence-transformers' Pooling computes the same: modules.json is written
    description = "the maximum over the sentence's tokens of the last layer"  # what the card says the embedding is

    def pool(self, inputs: PoolerInputs, model) -> torch.Tensor:  # [B, L, H] -> [B, H]
        padding = inputs.attention_mask.unsqueeze(-1) == 0
        return inputs.last_hidden_state.masked_fill(padding, float("-inf")).amax(dim=1)

    def transformers_code(self, pooling) -> str:  # the card's plain-transformers snippet: outputs, batch -> embeddings
        return (
            'padding = batch["attention_mask"].unsqueeze(-1) == 0\n'
            'embeddings = outputs.last_hidden_state.masked_fill(padding, float("-inf")).amax(dim=1)'
        )
