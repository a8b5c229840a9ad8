#!/usr/bin/python3
"""Tensor-parallel decoding of a small transformer decoder on CPU ranks, with gloo and with hostccl.

Every rank holds 1/N of each layer (Megatron's split): attention heads and the MLP's hidden units
are cut by columns on the way in and by rows on the way out, so each layer ends its attention and
its MLP with one AllReduce of the batch's activations. The same model (same seed) decodes the same
prompt greedily through torch.distributed twice, once over a gloo group and once over the "hccl"
backend, timed separately; rank 0 prints tokens/s for each and checks that the tokens agree and the
logits match (with --check, also against the whole model run on one rank).

    hccl-run -n 2 /usr/bin/python3 examples/python/tp_decode.py [--tokens 64] [--check]

From a checkout after `make build`, the package is found in ../../python by itself; an installed
hostccl (make install) needs nothing.
"""
import argparse
import math
import os
import sys
import time

try:
    import hostccl.torch as ht
except ImportError:  # running from the checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import hostccl.torch as ht
import torch
import torch.distributed as dist


def make_model(args):
    """The whole model's weights, the same on every rank (seeded)."""
    g = torch.Generator().manual_seed(1234)
    d, f, v = args.dim, args.ffn, args.vocab

    def w(*shape):
        return torch.randn(*shape, generator=g) / math.sqrt(shape[0])

    layers = [dict(wq=w(d, d), wk=w(d, d), wv=w(d, d), wo=w(d, d), w1=w(d, f), w2=w(f, d)) for _ in range(args.layers)]
    return dict(emb=torch.randn(v, d, generator=g), head=w(d, v), layers=layers)


def shard(model, rank, n, args):
    """This rank's columns of wq/wk/wv/w1 and rows of wo/w2 (heads and hidden units split evenly)."""
    hd = args.dim // args.heads
    cols = slice(rank * args.heads // n * hd, (rank + 1) * args.heads // n * hd)
    fcols = slice(rank * args.ffn // n, (rank + 1) * args.ffn // n)
    layers = [dict(wq=L["wq"][:, cols].contiguous(), wk=L["wk"][:, cols].contiguous(),
                   wv=L["wv"][:, cols].contiguous(), wo=L["wo"][cols, :].contiguous(),
                   w1=L["w1"][:, fcols].contiguous(), w2=L["w2"][fcols, :].contiguous()) for L in model["layers"]]
    return dict(emb=model["emb"], head=model["head"], layers=layers, heads=args.heads // n, hd=hd)


def rmsnorm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Decoder:
    """Greedy decoding with a KV cache; `reduce(t)` sums a layer's partial output over the ranks."""

    def __init__(self, sh, args, reduce, buffers):
        self.sh, self.args, self.reduce = sh, args, reduce
        total = args.prompt + args.tokens
        hl, hd = sh["heads"], sh["hd"]
        self.k = [torch.zeros(args.batch, hl, total, hd) for _ in sh["layers"]]
        self.v = [torch.zeros(args.batch, hl, total, hd) for _ in sh["layers"]]
        # Every AllReduce goes through one of these (for hostccl: arena memory, zero copy).
        self.out = buffers

    def step(self, tokens, pos):
        sh, hl, hd = self.sh, self.sh["heads"], self.sh["hd"]
        b = tokens.shape[0]
        x = sh["emb"][tokens]
        for i, L in enumerate(sh["layers"]):
            h = rmsnorm(x)
            q = (h @ L["wq"]).view(b, hl, 1, hd)
            self.k[i][:, :, pos] = (h @ L["wk"]).view(b, hl, hd)
            self.v[i][:, :, pos] = (h @ L["wv"]).view(b, hl, hd)
            k, v = self.k[i][:, :, :pos + 1], self.v[i][:, :, :pos + 1]
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1) @ v
            torch.matmul(att.reshape(b, hl * hd), L["wo"], out=self.out[0])
            self.reduce(self.out[0])
            x = x + self.out[0]
            h = rmsnorm(x)
            torch.matmul(torch.nn.functional.silu(h @ L["w1"]), L["w2"], out=self.out[1])
            self.reduce(self.out[1])
            x = x + self.out[1]
        return rmsnorm(x) @ sh["head"]

    def generate(self, prompt):
        logits = None
        for pos in range(prompt.shape[1]):
            logits = self.step(prompt[:, pos], pos)
        out, all_logits = [], []
        for pos in range(prompt.shape[1], prompt.shape[1] + self.args.tokens):
            tok = logits.argmax(-1)
            out.append(tok)
            all_logits.append(logits)
            logits = self.step(tok, pos)
        return torch.stack(out, 1), torch.stack(all_logits, 1)


def run(name, sh, args, prompt, reduce, buffers):
    dec = Decoder(sh, args, reduce, buffers)
    dist.barrier()
    t0 = time.perf_counter()
    tokens, logits = dec.generate(prompt)
    seconds = time.perf_counter() - t0
    rate = args.batch * args.tokens / seconds
    return tokens, logits, rate, seconds / (args.prompt + args.tokens)


def main():
    p = argparse.ArgumentParser(description="tensor-parallel decoding, gloo against hostccl")
    p.add_argument("--tokens", type=int, default=64, help="tokens to generate per sequence")
    p.add_argument("--prompt", type=int, default=8)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--check", action="store_true", help="also decode the whole model on rank 0 and compare")
    args = p.parse_args()

    dist.init_process_group("hccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    if args.heads % n or args.ffn % n:
        sys.exit(f"tp_decode: {n} ranks do not divide {args.heads} heads and {args.ffn} hidden units")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // n))
    gloo = dist.new_group(backend="gloo")
    model = make_model(args)
    sh = shard(model, rank, n, args)
    prompt = torch.randint(0, args.vocab, (args.batch, args.prompt), generator=torch.Generator().manual_seed(7))

    shape = (args.batch, args.dim)
    plain = [torch.empty(shape), torch.empty(shape)]
    arena = [ht.empty(*shape), ht.empty(*shape)]
    results = {}
    for name, reduce, buffers in (("gloo", lambda t: dist.all_reduce(t, group=gloo), plain),
                                  ("hostccl", lambda t: dist.all_reduce(t), arena)):
        run(name, sh, argparse.Namespace(**{**vars(args), "tokens": 2}), prompt, reduce, buffers)  # warm up
        results[name] = run(name, sh, args, prompt, reduce, buffers)

    ok = True
    if rank == 0:
        for name, (tokens, logits, rate, step) in results.items():
            print(f"{name:8s} {rate:8.1f} tokens/s  ({step * 1e3:.2f} ms per step, prompt included; {n} ranks, "
                  f"{args.layers} layers, {2 * args.layers} AllReduces of {args.batch * args.dim * 4} bytes each)")
        (tg, lg, rg, _), (th, lh, rh, _) = results["gloo"], results["hostccl"]
        diff = (lg - lh).abs().max().item()
        same = torch.equal(tg, th)
        print(f"outputs agree: {'yes' if same else 'NO'} ({tg.numel()} tokens; max |logit difference| {diff:.2e}); "
              f"hostccl/gloo speed {rh / rg:.1f}x")
        ok = same and diff < 1e-3
        if args.check:
            ref_sh = shard(model, 0, 1, args)
            ref_tokens, ref_logits = Decoder(ref_sh, args, lambda t: None,
                                             [torch.empty(shape), torch.empty(shape)]).generate(prompt)
            rdiff = (ref_logits - lh).abs().max().item()
            rsame = torch.equal(ref_tokens, th)
            print(f"one-rank reference agrees: {'yes' if rsame else 'NO'} (max |logit difference| {rdiff:.2e})")
            ok = ok and rsame and rdiff < 1e-3
    flag = torch.tensor([0 if ok else 1])
    dist.all_reduce(flag, group=gloo)
    dist.destroy_process_group()
    sys.exit(1 if flag.item() else 0)


if __name__ == "__main__":
    main()
