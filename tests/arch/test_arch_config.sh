#!/bin/sh
# DeepSeek-family and gpt-oss config.json and checkpoint mistakes are refused with a
# message naming the field or tensor, what was expected and what was found.
set -u
: "${SY_BUILDDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
for p in test-deepseek-v3 test-glm4-moe test-glm5 test-deepseek-v32 test-llama test-gpt-oss; do
    "$SY_BUILDDIR/sy-mkmodel" --preset $p --quiet --out "$tmp/$p" || { echo "FAIL: sy-mkmodel $p"; exit 1; }
done

# refuse NAME PRESET PYTHON-EDIT-OF-c PATTERN...: the edited checkpoint must fail to load with every pattern.
refuse() {
    name=$1 preset=$2 edit=$3
    shift 3
    n=$((n + 1))
    dir="$tmp/$name"
    rm -rf "$dir"
    cp -r "$tmp/$preset" "$dir"
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $edit; json.dump(c, open(p, 'w'))" \
        "$dir/config.json" || { echo "FAIL $name: cannot edit config.json"; fails=$((fails + 1)); return; }
    if "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" \
        --prompt-ids 1,2,3 -n 1 >/dev/null 2>"$tmp/err"; then
        echo "FAIL $name: loaded, expected a refusal"
        fails=$((fails + 1))
        return
    fi
    for pat in "$@"; do
        if ! grep -q -- "$pat" "$tmp/err"; then
            echo "FAIL $name: message lacks '$pat': $(cat "$tmp/err")"
            fails=$((fails + 1))
            return
        fi
    done
    echo "ok   $name: $(head -1 "$tmp/err")"
}

refuse topk-method test-deepseek-v3 'c["topk_method"] = "greedy"' "topk_method 'greedy' is not supported" "noaux_tc"
refuse mla-bias test-deepseek-v3 'c["attention_bias"] = True' "'attention_bias' is true"
refuse v-head-dim test-deepseek-v3 'c["v_head_dim"] = 20' "o_proj.weight' has shape \[64, 96\]" \
    "num_attention_heads\*v_head_dim\] = \[64, 80\]"
refuse kv-lora test-deepseek-v3 'c["kv_lora_rank"] = 40' "kv_a_proj_with_mqa.weight' has shape \[40, 64\]" \
    "kv_lora_rank+qk_rope_head_dim, hidden_size\] = \[48, 64\]"
refuse groups test-glm4-moe 'c["n_group"] = 3; c["topk_group"] = 1' "n_group (3) does not divide n_routed_experts (8)"
# The config reads yarn / linear / llama3 for every family; MLA's RoPE table computes default and yarn only.
refuse yarn-mla-truncate test-deepseek-v3 \
    'c["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128, "truncate": False}' \
    "rope_scaling.type 'yarn' with truncate false is not supported for DeepseekV3ForCausalLM"
refuse yarn-mla-attention-factor test-deepseek-v3 \
    'c.pop("rope_scaling", None); c["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5}' \
    "rope_parameters.rope_type 'yarn' with attention_factor 1.5 is not supported for DeepseekV3ForCausalLM"
refuse linear-mla test-glm5 \
    'c.pop("rope_scaling", None); c["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}' \
    "rope_parameters.rope_type 'linear' is not supported for GlmMoeDsaForCausalLM" "default RoPE or yarn"
refuse first-shared test-glm5 'c["indexer_types"] = ["shared", "full", "full"]' "indexer_types" "element 0"
refuse indexer-missing test-glm5 'c["indexer_types"] = ["full", "full", "full"]' \
    "model.layers.2.self_attn.indexer.wq_b.weight' (DSA indexer query projection" "is missing"
# DeepSeek-V3.2: the indexer reads the query latent; DeepseekV32Config's index_n_heads default is 64 (GLM-5's 32).
refuse v32-no-q-lora test-deepseek-v32 'c["q_lora_rank"] = None' "q_lora_rank should be a positive integer for deepseek_v32"
refuse v32-index-heads-default test-deepseek-v32 'del c["index_n_heads"]' \
    "indexer.wq_b.weight' has shape \[256, 32\]" "\[index_n_heads\*index_head_dim, q_lora_rank\] = \[1024, 32\]"
refuse mlp-types test-glm5 'c["mlp_layer_types"] = ["dense", "sparse"]' "mlp_layer_types' should list 3 strings"
# gpt-oss: layer_types, the fused experts' shapes, MXFP4 blocks without the mxfp4 declaration.
"$SY_BUILDDIR/sy-mkmodel" --preset test-gpt-oss --experts-layout mxfp4 --quiet --out "$tmp/gpt-oss-mxfp4" ||
    { echo "FAIL: sy-mkmodel test-gpt-oss --experts-layout mxfp4"; exit 1; }
refuse oss-layer-type test-gpt-oss 'c["layer_types"][2] = "chunked_attention"' \
    'layer_types\[2\] should be "sliding_attention" or "full_attention", found chunked_attention'
refuse oss-layer-count test-gpt-oss 'c["layer_types"] = c["layer_types"][:3]' "field 'layer_types' should list 4 strings"
refuse oss-expert-width test-gpt-oss 'c["intermediate_size"] = 32' \
    "mlp.experts.gate_up_proj_bias' has shape \[4, 128\]" "intermediate_size 32) implies \[4, 64\]"
refuse oss-mxfp4-undeclared gpt-oss-mxfp4 'del c["quantization_config"]' \
    "gate_up_proj_blocks' is an MXFP4 block tensor" "does not declare quant_method mxfp4"
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
