"""What `graphcmp compare` of two msprobe runs loads: nothing that only other inputs, options or commands need.

Every module loaded before the npu run's reading process is forked is start-up time on the comparison's critical
path, and so is every module the comparing process loads while that process reads (it reads the bench run then).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

ONLY_FOR_OTHERS = (
    "numpy.ma",  # numpy's np.unique asks for it: graphcmp's hot paths use arrays.sorted_unique
    "multiprocessing",  # forking.Forked forks and pipes by itself
    "tempfile", "secrets", "tomllib", "webbrowser", "importlib.resources",
    "sqlite3", "yaml",  # tb-graph files, rule files
    "graphcmp.core.matching.specs", "graphcmp.core.matching.manual", "graphcmp.core.readers.vis",
    "numba", "dash",
)


@pytest.mark.skipif(sys.platform == "win32", reason="the comparison forks where it can")
def test_a_comparison_of_two_msprobe_runs_loads_only_what_it_needs(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from graphcmp.cli.main import main
        from graphcmp.samples import sample_pair
        npu, bench = sample_pair()
        main(["compare", str(npu), str(bench), "-o", {str(tmp_path / "cmp.npz")!r}, "-q"])
        with open("loaded.txt", "w") as f:
            f.write(" ".join(m for m in {ONLY_FOR_OTHERS!r} if m in sys.modules))
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    loaded = (tmp_path / "loaded.txt").read_text().split()
    assert loaded == [], f"a comparison of two msprobe runs loaded {loaded}"
