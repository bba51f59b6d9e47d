#!/usr/bin/env python3
"""Compile every golden kernel with NVRTC and run it against a PyTorch
reference, on a GPU machine that has no Go toolchain.

    python3 codegen/testdata/gpucheck.py [--arch sm_90]

The golden files carry their parameters and launch geometry as comments
(see golden() in codegen_test.go); this script reads them back. It needs
libnvrtc, libcuda and torch; it prints one line per kernel and exits 1 on
any failure.
"""
import argparse
import ctypes
import glob
import os
import re
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = [b"--std=c++17", b"--fmad=false"]  # codegen.CompileOptions()

nvrtc = ctypes.CDLL("libnvrtc.so.13")
cuda = ctypes.CDLL("libcuda.so.1")


def check_cu(res, what):
    if res != 0:
        raise RuntimeError(f"{what} failed: CUresult {res}")


def compile_cubin(src, name, arch):
    prog = ctypes.c_void_p()
    r = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), (name + ".cu").encode(), 0, None, None)
    assert r == 0, r
    opts = OPTIONS + [f"--gpu-architecture={arch}".encode()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    res = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if res != 0:
        raise RuntimeError("NVRTC: " + log.value.decode())
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    return cubin, log.value.decode().strip()


DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
      "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}


def parse_shapes(line):
    out = []
    for m in re.finditer(r"(\w+)\[([^\]]*)\]|i64 scalar", line):
        if m.group(0) == "i64 scalar":
            out.append(None)
            continue
        dims = [int(d) for d in m.group(2).split(",") if d.strip()]
        out.append((m.group(1), dims))
    return out


def random_tensor(dt, shape, gen):
    t = DT[dt]
    if t == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool().cuda()
    if not t.is_floating_point:
        return torch.randint(-8, 8, shape, generator=gen).to(t).cuda()
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2).to(t).cuda()


def f16r(x):
    return x.to(torch.float16).to(torch.float32)


# References: inputs as torch tensors on the GPU, scalar literals as floats.
def wrap32(a):
    return a.astype(np.int64).astype(np.int32)


def int_ops(x, y):
    x, y = x.cpu().numpy().astype(np.int64), y.cpu().numpy().astype(np.int64)
    s = wrap32(x + y).astype(np.int64)
    m = wrap32(s * np.int64(np.int32(np.int64(3000000000).astype(np.int32)))).astype(np.int64)
    q = np.where(y == 0, 0, np.sign(m) * np.sign(y) * (np.abs(m) // np.where(y == 0, 1, np.abs(y))))
    n = wrap32(-np.abs(q)).astype(np.int64)
    mx = np.maximum(n, np.minimum(x, -2))
    return [torch.from_numpy(wrap32(np.maximum(mx, 0))), torch.from_numpy(wrap32(x - y))]


REFS = {
    "add_f32": lambda x, y: [x + y],
    "chain_f16_literal_tail": lambda x, y: [torch.relu(x.float() * f16r(torch.tensor(0.1)).cuda() + y.float()).half()],
    "transcendental_bf16_odd": lambda x: [torch.tanh(torch.sigmoid(torch.nn.functional.gelu(x.float()))).bfloat16(),
                                          torch.nn.functional.gelu(x.float()).bfloat16()],
    "exp_log_f64": lambda x: [(-(torch.log(torch.exp(x)) - 1.5) / 3).abs()],
    "int_ops_i32": int_ops,
    "div_i64_literal": lambda x: [torch.div(x - 7, 2, rounding_mode="trunc")],
    "where_bool": lambda c, x, y: [torch.where(c, 0.0, torch.where(c, x, y)), torch.where(c, 0.0, torch.where(c, x, y)) != 0],
    "casts": lambda x, i, h, d, c, l: [x.to(torch.int32), i.half(), d.bfloat16(), c.float(), h.double(), l.to(torch.int32),
                                       x.to(torch.int64), x.half().float()],
    "broadcast_bias": lambda x, b, s: [(x + b) * s],
    "broadcast_yield_smaller": lambda x, b: [(x.float() - torch.exp(b.float())).bfloat16(), torch.exp(b.float()).bfloat16()],
    "sum_rows_warp_f32": lambda x: [x.sum(1)],
    "sum_rows_block_f16": lambda x: [(x.float() * x.float()).sum(1).half()],
    "mean_outer_keepdim_f32": lambda x: [x.mean(0, keepdim=True)],
    "max_middle_bf16": lambda x: [(-x.float()).amax(1).bfloat16()],
    "max_mixed_axes_i64": lambda x: [x.amax((0, 2, 3))],
    "sum_all_i32": lambda x: [x.sum((0, 1)).to(torch.int32)],
    "mean_rows_block_f64": lambda x: [x.mean(1, keepdim=True)],
    "centered_square_sum_broadcast": lambda x, m: [((x - m) * (x - m)).sum(1), x - m],
    "sum_rows_yield_broadcast_f32": lambda x, y: [(x * torch.exp(y)).sum(1), torch.exp(y)],
    "mean_outer_yield_keepdim_bf16": lambda x, m: [(-m.float()).bfloat16(),
                                                   (x.float() - m.float()).mean(0, keepdim=True).bfloat16()],
    "scalar_tensor_exp": lambda x: [torch.exp(x)],
    "one_element_i64": lambda x: [x * -3],
    "empty_add": lambda x: [x + 1],
    "empty_reduction": lambda x: [x.sum(1, keepdim=True)],
    "empty_max_i32": lambda x: [torch.full((5,), -2**31, dtype=torch.int32, device="cuda")],
    "loop_index_scalar": lambda x, i: [x * 3.0, x.to(torch.int64) + 3],
}
RUNTIME_SCALAR = 3


def run_kernel(cubin, name, params, grid, ins, outs, offset_elems=0):
    mod = ctypes.c_void_p()
    check_cu(cuda.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
    fn = ctypes.c_void_p()
    check_cu(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
    args = list(ins) + list(outs)
    holders = []
    for p in params:
        if p["kind"] == "ptr":
            t = args[p["arg"]]
            holders.append(ctypes.c_uint64(t.data_ptr()))
        elif p["kind"] == "scalar":
            holders.append(ctypes.c_int64(RUNTIME_SCALAR))
        elif p["size"] == 4:
            holders.append(ctypes.c_uint32(p["bits"]))
        else:
            holders.append(ctypes.c_uint64(p["bits"]))
    ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    check_cu(cuda.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, stream, ptrs, None), "cuLaunchKernel")
    torch.cuda.synchronize()
    cuda.cuModuleUnload(mod)


def close(got, want, name):
    got, want = got.cpu(), want.cpu()
    if got.shape != want.shape and got.numel() == want.numel():
        want = want.reshape(got.shape)
    if got.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5, torch.float64: 1e-12}[got.dtype]
        if "sum" in name or "mean" in name or "centered" in name:
            tol = max(tol, 1e-4)
        return torch.allclose(got.double(), want.to(got.dtype).double(), rtol=tol, atol=tol, equal_nan=True)
    return torch.equal(got, want.to(got.dtype))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()
    torch.cuda.init()
    torch.zeros(1).cuda()
    failed = 0
    for path in sorted(glob.glob(os.path.join(HERE, "*.cu"))):
        case = os.path.basename(path)[:-3]
        src = open(path).read()
        name = re.search(r"// kernel (\w+)", src).group(1)
        grid = int(re.search(r"grid \[(\d+)", src).group(1))
        params = []
        for m in re.finditer(r"// param (\w+)\s+(.+?)\s+(arg (\d+)( \(runtime scalar\))?|literal bits (0x[0-9a-f]+))\n", src):
            ctype = m.group(2)
            if m.group(6):
                params.append({"kind": "lit", "bits": int(m.group(6), 16), "size": 8 if ctype in ("double", "long long") else 4})
            else:
                params.append({"kind": "scalar" if m.group(5) else "ptr", "arg": int(m.group(4))})
        try:
            cubin, log = compile_cubin(src, name, a.arch)
        except RuntimeError as e:
            print(f"FAIL {case}: {e}")
            failed += 1
            continue
        if log:
            print(f"WARN {case}: {log}")
        if case not in REFS or case == "large_long_index":
            print(f"ok   {case} (compiled)")
            continue
        ins_shapes = parse_shapes(re.search(r"// inputs: (.*)", src).group(1))
        outs_shapes = parse_shapes(re.search(r"// outputs: (.*)", src).group(1))
        gen = torch.Generator().manual_seed(1)
        ins = [random_tensor(s[0], s[1], gen) if s else torch.empty(0) for s in ins_shapes]
        ref_args = [x if s else RUNTIME_SCALAR for x, s in zip(ins, ins_shapes)]
        want = REFS[case](*ref_args)
        ok = True
        # Aligned, then (for flat kernels) every tensor one element off, which
        # takes the scalar path.
        for shift in (0, 1) if "strategy flat" in src else (0,):
            def shifted(t):
                if shift == 0 or t.numel() == 0:
                    return t
                buf = torch.empty(t.numel() + 1, dtype=t.dtype, device="cuda")
                view = buf[1:].view(t.shape)
                view.copy_(t)
                return view
            sins = [shifted(x) if s else x for x, s in zip(ins, ins_shapes)]
            outs = [shifted(torch.full(s[1], 7, dtype=DT[s[0]], device="cuda")) for s in outs_shapes]
            run_kernel(cubin, name, params, grid, sins, outs)
            for k, (g, w) in enumerate(zip(outs, want)):
                if not close(g, w.cuda() if isinstance(w, torch.Tensor) else w, case):
                    print(f"FAIL {case}: output {k} (shift {shift}) differs:\n got {g.flatten()[:8]}\nwant {w.flatten()[:8]}")
                    ok = False
        if ok:
            print(f"ok   {case} (ran)")
        else:
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
