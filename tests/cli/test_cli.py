"""The command line in-process: exit codes, --json output, one-line errors."""

from __future__ import annotations

import json
import shutil

import pytest

from graphcmp.cli.main import main
from tests.conftest import DATA


def _json_out(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out)


def test_compare_finds_the_divergence_and_exits_1(perturb_pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    code = main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "--json", "-q"])
    assert code == 1
    summary = _json_out(capsys)
    assert summary["npu"]["nodes"] == summary["bench"]["nodes"] == 178
    assert summary["matched"] == 178 and summary["verdicts"]["error"] > 0
    assert out.is_file()


def test_identical_runs_exit_0(perturb_pair, tmp_path):
    assert main(["compare", str(perturb_pair[1]), str(perturb_pair[1]), "-o", str(tmp_path / "c.json"), "-q"]) == 0


def test_compare_pauses_the_cyclic_collector_and_restores_it(perturb_pair, tmp_path, monkeypatch):
    import gc

    from graphcmp.core import compare

    seen, compare_graphs = [], compare.compare_graphs

    def noted(*args, **kwargs):
        seen.append(gc.isenabled())
        return compare_graphs(*args, **kwargs)

    monkeypatch.setattr(compare, "compare_graphs", noted)
    assert gc.isenabled()
    assert main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(tmp_path / "c.npz"), "-q"]) == 1
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:  # a caller that had it off finds it off
        assert main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(tmp_path / "d.npz"), "-q"]) == 1
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_info_reads_back_the_same_counts(perturb_pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "--json", "-q"])
    written = _json_out(capsys)
    assert main(["info", str(out), "--json"]) == 1  # as compare: the runs differ
    read = _json_out(capsys)
    assert read["verdicts"] == written["verdicts"] and read["matched_by_rule"] == written["matched_by_rule"]


def test_build_and_info(perturb_pair, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["build", str(perturb_pair[1]), "-o", str(out), "--json", "-q"]) == 0
    assert _json_out(capsys)["nodes"] == 178
    assert main(["info", str(out), "--json"]) == 0
    assert _json_out(capsys)["by_kind"]["param_grad"] == 18


def test_shifted_counters_are_aligned_by_default(perturb_pair, tmp_path, capsys, data_dir):
    npu = data_dir / "msprobe_extraop" / "npu"
    code = main(["compare", str(npu), str(perturb_pair[1]), "-o", str(tmp_path / "a.json"), "--json", "-q",
                 "--no-fuzzy"])
    exact = _json_out(capsys)
    main(["compare", str(npu), str(perturb_pair[1]), "-o", str(tmp_path / "b.json"), "--json", "-q"])
    aligned = _json_out(capsys)
    # the 20 shifted linear/add calls plus the 6 adds whose ids coincide across layers' positions (kept out of
    # the exact pass so no pair crosses another: tests/core/matching/test_fuzzy_order.py)
    assert aligned["matched"] > exact["matched"]
    assert aligned["matched_by_rule"] == {"root": 1, "group": 1, "exact": 150, "fuzzy": 26}
    # exact names alone pair other calls with each other: never "agree"
    assert code == 1 and exact["verdict"] != "agree"


def test_demo_runs_on_bundled_samples(tmp_path, capsys):
    assert main(["demo", "-o", str(tmp_path / "demo.json"), "--json"]) == 1  # the sample runs differ
    summary = _json_out(capsys)
    assert summary["verdicts"]["error"] > 0
    assert summary["analysis"]["first"]["node"] == "Functional.linear.2.forward"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "{missing}", "{bench}"], "no such file or folder"),
        (["compare", "{empty}", "{bench}"], "empty: holds no dump"),
        (["compare", "{truncated_construct}", "{bench}", "--thresholds", "{bad_toml}"], "not valid TOML"),
        (["info", "{bench}/dump.json"], "not a graphcmp"),
        (["info", "{missing}"], "file not found"),
    ],
)
def test_bad_input_one_line_exit_2(argv, message, perturb_pair, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.toml").write_text("warn = [")
    places = {"missing": str(tmp_path / "nope"), "bench": str(perturb_pair[1]), "empty": str(tmp_path / "empty"),
              "truncated_construct": str(perturb_pair[0]), "bad_toml": str(tmp_path / "bad.toml")}
    code = main([a.format(**places) for a in argv] + ["-q"] * (argv[0] == "compare"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("graphcmp: error:") and message in err[0]


def test_unwritable_output_is_a_clear_error(perturb_pair, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(blocker / "sub" / "c.json"), "-q"])
    assert code == 2 and "cannot write" in capsys.readouterr().err


def test_inputs_are_never_modified(perturb_pair, tmp_path):
    copy = tmp_path / "npu"
    shutil.copytree(perturb_pair[0], copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    main(["compare", str(copy), str(perturb_pair[1]), "-o", str(tmp_path / "c.json"), "-q"])
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


@pytest.mark.parametrize("target", ["", "{npu}/dump.json", "{npu}/cmp.json", "{npu}"])
def test_output_never_overwrites_or_enters_an_input(target, perturb_pair, tmp_path, capsys):
    npu = tmp_path / "npu"
    shutil.copytree(perturb_pair[0], npu)
    before = {p.name: p.read_bytes() for p in npu.iterdir()}
    for argv in (["build", str(npu)], ["compare", str(npu), str(perturb_pair[1])]):
        code = main([*argv, "-o", target.format(npu=npu), "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("graphcmp: error:")
    assert {p.name: p.read_bytes() for p in npu.iterdir()} == before


def test_binary_thresholds_file_is_a_clear_error(perturb_pair, tmp_path, capsys):
    bad = tmp_path / "x.pb"
    bad.write_bytes(bytes(range(256)))
    code = main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(tmp_path / "c.json"), "-q",
                 "--thresholds", str(bad)])
    assert code == 2 and "not a text file" in capsys.readouterr().err


def test_compare_side_by_side_writes_the_result_one_process_writes(perturb_pair, tmp_path, capsys, monkeypatch):
    from graphcmp.core.npzio import read_npz
    from graphcmp.core.readers import pair

    args = ["compare", str(perturb_pair[0]), str(perturb_pair[1]), "--json", "-q", "-o"]
    assert main([*args, str(tmp_path / "one.npz")]) == 1
    monkeypatch.setattr(pair, "PARALLEL_READ_BYTES", 0)  # the sample pair read, and its result written, in two
    assert main([*args, str(tmp_path / "two.npz")]) == 1
    one, two = read_npz(tmp_path / "one.npz"), read_npz(tmp_path / "two.npz")
    assert one["npu"].keys() == two["npu"].keys() and one["npu"]["nodes"]["id"] == two["npu"]["nodes"]["id"]
    assert one["summary"] == two["summary"] and one["analysis"] == two["analysis"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.npz", "two.npz"]


@pytest.mark.parametrize("command", [None, "build", "compare", "info", "diverge", "consistency", "export", "serve",
                                     "demo"])
def test_help_is_plain_text_with_the_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"] if command else ["--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    assert "``" not in out and "`" not in out  # the docstrings' reStructuredText markup, as a terminal shows it
    assert "exit codes:\n  0  done" in out and "\n  2  bad input or usage" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "x"], "graphcmp: error: compare: the following arguments are required: bench; "
                       "see graphcmp compare --help"),
    ([], "graphcmp: error: the following arguments are required: COMMAND; see graphcmp --help"),
    (["export", "x.npz", "--to", "nope"], "graphcmp: error: export: argument --to: invalid choice: 'nope'"),
])
def test_a_usage_error_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2
    assert len(err) == 1 and err[0].startswith(message), err


def test_output_of_another_suffix_is_refused_before_anything_is_written(perturb_pair, tmp_path, capsys):
    out = tmp_path / "out.txt"
    assert main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "-q"]) == 2
    assert f"{out}: -o names a result file ending in .npz or .json" in capsys.readouterr().err
    assert not out.exists()


def test_compare_given_a_result_file_names_the_commands_that_open_it(perturb_pair, tmp_path, capsys):
    for name, kind in (("cmp.npz", "npz"), ("cmp.json", "JSON")):
        saved = tmp_path / name
        assert main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(saved), "-q"]) == 1
        capsys.readouterr()
        assert main(["compare", str(saved), str(perturb_pair[1]), "-o", str(tmp_path / "again.npz"), "-q"]) == 2
        assert (f"{saved}: is a graphcmp result file ({kind}), "
                "not a run; open it with graphcmp info, diverge or serve") in capsys.readouterr().err


def test_a_folder_without_a_dump_is_named_before_the_output(perturb_pair, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["compare", str(empty), str(perturb_pair[1]), "-o", str(empty / "cmp.npz"), "-q"]) == 2
    assert f"{empty}: holds no dump" in capsys.readouterr().err  # not that -o lies inside it


@pytest.mark.parametrize("command", ["diverge", "info"])
def test_a_dump_folder_where_a_result_belongs_says_what_is_expected(command, perturb_pair, capsys):
    assert main([command, str(perturb_pair[1])]) == 2
    assert (f"{perturb_pair[1]}: is a dump folder (msprobe); this command takes a result file or a results folder, "
            "which graphcmp compare NPU BENCH -o cmp.npz writes") in capsys.readouterr().err


def test_an_error_quoting_newlines_stays_one_line(tmp_path, capsys):
    run = tmp_path / "npu"
    run.mkdir()
    (run / "dump.json").write_bytes(b'{"data": {"Functional.a\n\xff\n.0.forward": {}}}')
    assert main(["build", str(run), "-o", str(tmp_path / "run.json"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bytes that are not UTF-8 (ff) in \"Functional.a\\n\\xff\\n.0.forward\"" in err[0], err


def test_compare_of_msprobe_runs_starts_the_reader_build_when_it_is_missing(perturb_pair, tmp_path, monkeypatch,
                                                                           capsys):
    """Until the compiled dump.json reader is built, small dumps are read by the chunked read and never build it:
    the command starts its build in the background once it is done, and says so on a terminal."""
    import sys

    from graphcmp.cli.kernels import NOTE
    from graphcmp.core.readers import msprobe_scan

    started = []
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    npu, bench = (str(path) for path in perturb_pair)
    assert main(["compare", npu, bench, "-o", str(tmp_path / "a.npz"), "-q"]) == 1
    assert started == []  # built (tests/conftest.py)
    monkeypatch.setattr(msprobe_scan._KERNELS, "buildable", lambda: True)
    capsys.readouterr()
    assert main(["compare", npu, bench, "-o", str(tmp_path / "b.npz"), "-q"]) == 1
    assert started == ["graphcmp.core.readers.msprobe_scan:build_kernels"]
    assert NOTE not in capsys.readouterr().err  # -q, and no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["build", npu, "-o", str(tmp_path / "run.json")]) == 0
    assert len(started) == 2 and NOTE in capsys.readouterr().err
    module, function = started[0].split(":")
    assert callable(getattr(__import__(module, fromlist=[function]), function))


def test_reading_no_msprobe_run_starts_no_reader_build(tmp_path, monkeypatch):
    from graphcmp.cli.kernels import build_reader_later
    from graphcmp.core.readers import msprobe_scan

    started = []
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    monkeypatch.setattr(msprobe_scan._KERNELS, "buildable", lambda: True)
    vis = DATA / "vis_tf_small" / "compare_v26.vis.db.gz"
    assert not build_reader_later([str(vis), str(tmp_path / "missing")], None, quiet=True) and started == []
    assert build_reader_later([str(vis)], "msprobe", quiet=True) and len(started) == 1


def test_no_second_reader_build_starts_while_one_runs(monkeypatch):
    """A build holds its lock while it builds either set (the pass's or the id parser's): a command ending then
    starts no other."""
    import fcntl

    from graphcmp.core import compiled
    from graphcmp.core.readers import msprobe_scan, naming_compiled

    started = []
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    monkeypatch.setattr(msprobe_scan._KERNELS, "buildable", lambda: True)
    folder = compiled._folders(naming_compiled.KERNELS.source.parent)[0]
    folder.mkdir(exist_ok=True)
    with open(folder / f"_naming_{naming_compiled.KERNELS.key()}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            assert not msprobe_scan.build_in_background() and started == []
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    assert msprobe_scan.build_in_background() and len(started) == 1
