"""The Python package's ctypes layer from outside the build: a copy of libcake.so and its compile worker in a folder
of their own, loaded by a path relative to another folder, still names the worker beside it
after the script changes folder; tensors cake cannot describe are refused before any
call (with torch).

    python3 ctypes_trust_check.py LIBCAKE WORKER PYTHON_DIR
"""
import os
import shutil
import sys
import tempfile


def main():
    lib, worker, python_dir = sys.argv[1:4]
    sys.path.insert(0, python_dir)
    import cake

    root = tempfile.mkdtemp(prefix="cake-ctypes-")
    os.makedirs(os.path.join(root, "lib"))
    os.makedirs(os.path.join(root, "work"))
    shutil.copy2(lib, os.path.join(root, "lib", "libcake.so"))
    expected = os.path.join(root, "lib", "cake_compile_worker")
    shutil.copy2(worker, expected)
    os.chdir(os.path.join(root, "work"))
    rt = cake.Runtime("../lib/libcake.so")
    os.chdir("/")
    got = rt.compile_worker
    same = bool(got) and os.path.samefile(got, expected)
    shutil.rmtree(root)
    if not same:
        print(f"FAIL: worker '{got}', expected '{expected}'")
        return 1
    print(f"worker: {got}")
    try:
        import torch
    except ImportError:
        print("torch not importable: the tensor checks are skipped")
        return 0
    for name, t, want in [("offs", torch.zeros(4, dtype=torch.int32), "offs: must be a CUDA tensor"),
                          ("x", torch.zeros(4, dtype=torch.uint8), "x: must be a CUDA tensor")]:
        try:
            cake.dltensor(t, name)
            print(f"FAIL: {name} on {t.device} was accepted")
            return 1
        except ValueError as e:
            if want not in str(e):
                print(f"FAIL: '{e}' does not say '{want}'")
                return 1
    if torch.cuda.is_available():
        try:
            cake.dltensor(torch.zeros(4, dtype=torch.uint8, device="cuda"), "x")
            print("FAIL: a uint8 tensor was accepted")
            return 1
        except ValueError as e:
            if "x: dtype torch.uint8 is not one cake takes" not in str(e):
                print(f"FAIL: {e}")
                return 1
        t = torch.zeros(4, device="cuda")
        d = cake.dltensor(t, "x")
        if d.device.device_type != cake._capi.kDLCUDA or d.device.device_id != t.device.index:
            print("FAIL: the DLTensor's device is not the tensor's")
            return 1
    print("tensor checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
