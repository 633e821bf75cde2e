# forward pass, sampler, KV blocks
