"""cake.Runtime.prebuild where a Python user reaches it: a malformed shapes text and a job
with no route raise a cake.CakeError naming why (with the summary as .details), and a job NVRTC can build is
compiled once, then found in memory.

    python3 ctypes_prebuild_check.py LIBCAKE PYTHON_DIR
"""
import sys
import tempfile

CakeError = Exception  # cake.CakeError once main() has imported cake


def expect_error(fn, want):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is checked below
        if not isinstance(e, CakeError) or want not in str(e):
            raise AssertionError(f"expected CakeError with '{want}', got {type(e).__name__}: {e}")
        return e
    raise AssertionError(f"no error; expected '{want}'")


def main():
    lib, python_dir = sys.argv[1:3]
    sys.path.insert(0, python_dir)
    import cake
    global CakeError
    CakeError = cake.CakeError

    job = {"arch": "sm_90a", "sms": 132,
           "problems": [{"op": "elementwise.add", "dims": {"n": 4096}, "dtypes": {"out": "f32"}}]}
    offline = cake.Runtime(lib, cache_dir="", aot_dir="", jit=False)
    expect_error(lambda: offline.prebuild('{"problems": [{"op": "nope.fwd"}]}'), "argument 'shapes_json'")
    e = expect_error(lambda: offline.prebuild(job), "no route")
    assert e.details["built"] == 0 and len(e.details["skipped"]) == 1, e.details

    rt = cake.Runtime(lib, cache_dir=tempfile.mkdtemp(prefix="cake-prebuild-"), aot_dir="")
    first = rt.prebuild(job)
    assert first["built"] == 1 and not first["failed"], first
    again = rt.prebuild(job)
    assert again["built"] == 0 and again["up_to_date"] == 1, again
    stats = rt.stats()
    assert stats["compiles"] == 1 and stats["failures"] == 0, stats
    assert offline.stats()["compiles"] == 0, offline.stats()
    print("prebuild:", first, again)
    return 0


if __name__ == "__main__":
    sys.exit(main())
