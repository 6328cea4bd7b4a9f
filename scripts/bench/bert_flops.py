"""Model training FLOPs per token of BERT masked-LM, counted as memtrain counts them.

The same formula as BertForMaskedLM::flops_per_step_token (models/bert_for_masked_lm.cpp):
forward + backward = 3 x forward; per encoder layer 2 x (4 C^2 + 2 C I) for the projections and
2 x 2 T C for attention scores and context (Narayanan et al. 2021, eq. 3); the MLM head (transform
dense C x C and decoder C x V) 2 x (C^2 + C V) at `head_fraction` of the tokens: 1.0 when logits
are computed at every position (Hugging Face), the masking probability when only the masked
positions are decoded (memtrain, NVIDIA's BERT). Embeddings, LayerNorm, softmax and the optimizer
are not counted, on either side.
"""


def train_flops_per_token(vocab, hidden, layers, ffn, seq, head_fraction):
    C, I, V, T, L = float(hidden), float(ffn), float(vocab), float(seq), float(layers)
    layer = 2.0 * (4.0 * C * C + 2.0 * C * I) + 2.0 * 2.0 * T * C
    head = 2.0 * (C * C + C * V)
    return 3.0 * (L * layer + head_fraction * head)
