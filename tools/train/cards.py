"""Loss-curve plots and MODEL_CARD.md for the bundled models."""
from __future__ import annotations

import json
import os


def plot_curves(summary: dict, path: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c = summary["curve"]
    ev = summary.get("evals", [])
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    tok = [t / 1e6 for t in c["tokens"]]
    ax[0].plot(tok, c["loss"], label="train main (t+1)", lw=1)
    ax[0].plot(tok, c["loss_mtp1"], label="train MTP step 1 (t+2)", lw=1)
    ax[0].plot(tok, c["loss_mtp2"], label="train MTP chained step 2 (t+3)", lw=1)
    if ev:
        et = [e["tokens"] / 1e6 for e in ev]
        ax[0].plot(et, [e["code_loss"] for e in ev], "o-", label="held-out code (t+1)")
        ax[0].plot(et, [e["prose_loss"] for e in ev], "s-", label="held-out prose (t+1)")
    ax[0].set_xlabel("training tokens (M)")
    ax[0].set_ylabel("cross-entropy (nats)")
    ax[0].set_ylim(0, 8)
    ax[0].grid(alpha=0.3)
    ax[0].legend(fontsize=8)
    ax[0].set_title(title + ": loss")
    if ev:
        et = [e["tokens"] / 1e6 for e in ev]
        ax[1].plot(et, [e["code_acc"] for e in ev], "o-", label="held-out code next-token acc")
        ax[1].plot(et, [e["prose_acc"] for e in ev], "s-", label="held-out prose next-token acc")
        ax[1].plot(et, [e["code_mtp1_acc"] for e in ev], "o--", label="held-out code MTP-1 acc (t+2)")
        ax[1].plot(et, [e["prose_mtp1_acc"] for e in ev], "s--", label="held-out prose MTP-1 acc (t+2)")
    ax[1].set_xlabel("training tokens (M)")
    ax[1].set_ylabel("top-1 accuracy")
    ax[1].set_ylim(0, 1)
    ax[1].grid(alpha=0.3)
    ax[1].legend(fontsize=8)
    ax[1].set_title(title + ": held-out accuracy (quick evals, 8k tokens each)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"


def eval_table(ev: dict) -> str:
    rows = ["| metric | code | prose |", "|---|---|---|"]
    keys = [("main_acc", "next-token accuracy (main model, t+1)"),
            ("main_loss", "next-token loss (nats)"),
            ("mtp1_acc_teacher_forced", "MTP draft position 1 (t+2) accuracy"),
            ("mtp2_acc_teacher_forced", "MTP chained position 2 (t+3), teacher-forced input"),
            ("mtp3_acc_teacher_forced", "MTP chained position 3 (t+4), teacher-forced input"),
            ("mtp_chain1_acc_vs_truth", "greedy chain: d1 correct"),
            ("mtp_chain2_acc_vs_truth", "greedy chain: d1 and d2 correct"),
            ("mtp_chain3_acc_vs_truth", "greedy chain: d1, d2 and d3 correct"),
            ("mtp_chain1_accept_vs_main_greedy", "greedy spec-decode acceptance, draft 1 (= main argmax)"),
            ("mtp_chain2_accept_vs_main_greedy", "… drafts 1-2 both accepted"),
            ("mtp_chain3_accept_vs_main_greedy", "… drafts 1-3 all accepted"),
            ("expected_accepted_drafts_k3_vs_main", "expected accepted drafts per step (k=3)")]
    for k, label in keys:
        a, b = ev["code"].get(k), ev["prose"].get(k)
        if a is None:
            continue
        if "loss" in k or k.startswith("expected"):
            rows.append(f"| {label} | {a:.3f} | {b:.3f} |")
        else:
            rows.append(f"| {label} | {pct(a)} | {pct(b)} |")
    rows.append(f"| evaluated tokens | {ev['code']['tokens']:,} | {ev['prose']['tokens']:,} |")
    return "\n".join(rows)


def write_card(path: str, name: str, kind: str, fmt: str, summary: dict, shipped_eval: dict, data_stats: dict,
               files: list, size_bytes: int, tc: dict, samples: list, extra: str = ""):
    p = summary["params"]
    moe = kind == "moe"
    lines = []
    A = lines.append
    A(f"# {name}\n")
    A(f"A tiny **Qwen3.5-architecture** {'MoE' if moe else 'dense'} hybrid model (Gated DeltaNet + gated "
      f"attention, 3:1) with a trained **MTP head**, bundled with mere.run as a real, small checkpoint for tests, "
      f"demos and speculative-decoding acceptance. Trained from scratch in minutes on one H200 on Python code "
      f"and English prose found on the training machine's own disk (see `docs/training.md`). It completes Python "
      f"code plausibly; it is not a useful assistant.\n")
    A("## Format\n")
    A(f"- {fmt}")
    A(f"- files: {', '.join(sorted(files))} — {size_bytes / 2 ** 20:.2f} MiB in total")
    A("- `config.json`: real Qwen3.5 nested form (`text_config` has every field, `layer_types`, "
      "`mtp_num_hidden_layers: 1`, `rope_parameters`); tokenizer: byte-level BPE, 8192 ids incl. special tokens, "
      "Qwen3.5 split regex + NFC, ChatML template with `<think>` / tools (`tokenizer_config.json`).")
    A(f"- eos: `<|im_end|>` ({tc.get('_im_end')}) and `<|endoftext|>` ({tc['eos_token_id']}); "
      "`generation_config.json` recommends temperature 0.7, top_p 0.95, top_k 20.\n")
    A("## Architecture\n")
    A("| | |\n|---|---|")
    A(f"| hidden | {tc['hidden_size']} |")
    A(f"| layers | {tc['num_hidden_layers']} ({', '.join('GDN' if t == 'linear_attention' else 'attn' for t in tc['layer_types'])}) |")
    A(f"| gated attention | {tc['num_attention_heads']} q heads / {tc['num_key_value_heads']} kv heads, head_dim "
      f"{tc['head_dim']}, partial RoPE {tc['rope_parameters']['partial_rotary_factor']} "
      f"(θ = {tc['rope_parameters']['rope_theta']:g}) |")
    A(f"| Gated DeltaNet | {tc['linear_num_key_heads']} key heads × {tc['linear_key_head_dim']}, "
      f"{tc['linear_num_value_heads']} value heads × {tc['linear_value_head_dim']} (Hv/Hk = "
      f"{tc['linear_num_value_heads'] // tc['linear_num_key_heads']}), conv {tc['linear_conv_kernel_dim']} |")
    if moe:
        A(f"| FFN | MoE: {tc['num_experts']} experts, top-{tc['num_experts_per_tok']} (softmax, renormalised), "
          f"expert width {tc['moe_intermediate_size']}, shared expert {tc['shared_expert_intermediate_size']} "
          f"with sigmoid gate |")
    else:
        A(f"| FFN | SwiGLU {tc['intermediate_size']} |")
    A(f"| vocab | {tc['vocab_size']} (untied embedding / lm_head) |")
    A("| MTP | 1 layer: `pre_fc_norm_embedding`, `pre_fc_norm_hidden`, `fc` [H, 2H] (embedding first), a "
      "full-attention decoder layer with the model's FFN type, `mtp.norm`; shares embedding and lm_head |")
    A(f"| parameters | {p['total'] / 1e6:.2f} M total = {p['main'] / 1e6:.2f} M main + {p['mtp'] / 1e6:.2f} M MTP; "
      f"embedding {p['embedding'] / 1e6:.2f} M, lm_head {p['lm_head'] / 1e6:.2f} M; active per token (main) "
      f"{p['active_main'] / 1e6:.2f} M |")
    A(f"| trained context | {summary['args']['seq']} tokens |\n")
    A("## Training\n")
    a = summary["args"]
    A(f"- data: {data_stats['tokens']['train'] / 1e6:.1f} M training tokens "
      f"(code {data_stats['tokens']['train_by_kind']['code'] / 1e6:.1f} M, prose "
      f"{data_stats['tokens']['train_by_kind']['prose'] / 1e6:.1f} M, synthetic chat "
      f"{data_stats['tokens']['train_by_kind']['chat'] / 1e6:.1f} M); held-out split by file "
      f"({data_stats['heldout_rule']}).")
    A(f"- {summary['steps']} steps × {a['batch']} × {a['seq']} tokens = **{summary['tokens_seen'] / 1e6:.1f} M tokens "
      f"seen** ({summary['epochs']:.2f} epochs) in {summary['train_seconds']:.0f} s of H200 time "
      f"(median {summary['median_tokens_per_s'] / 1e3:.0f} k tokens/s, sharing the GPU with the other bundled model).")
    A(f"- AdamW (β 0.9/0.95, wd {a['wd']}), peak lr {a['lr']}, {a['warmup']} warm-up steps, cosine to "
      f"{a['min_lr_frac']:.0%} over the wall-clock budget, bf16 autocast (GDN core in fp32), grad clip 1.0, seed "
      f"{a['seed']}.")
    A(f"- loss = CE(t+1) + {a['mtp_w1']}·CE(MTP step 1 → t+2) + {a['mtp_w2']}·CE(MTP chained step 2 → t+3, fed "
      f"with the MTP's own post-norm hidden, attending to step-1 rows 0..t plus itself)"
      + (f" + {a['aux']}·load-balance loss" if moe else "") + ".\n")
    A("![loss curves](loss_curves.png)\n")
    A("## Held-out evaluation (this checkpoint as shipped)\n")
    A(f"{shipped_eval.get('_note', '')}\n")
    A(eval_table(shipped_eval))
    A("")
    if samples:
        A("## Samples (greedy, from the shipped weights)\n")
        for s in samples:
            A("~~~~text")
            A(s)
            A("~~~~")
    if extra:
        A(extra)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
