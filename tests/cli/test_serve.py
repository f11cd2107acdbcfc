"""`graphcmp serve`: bad input stops at start-up with one line and exit 2; the CLI loads Dash only to serve."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from graphcmp.cli.main import main


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file or folder"),
    ("{broken", "cmp.json"),
    ('{"format": "graphcmp.compare", "schema_version": 1}', "cmp.json: field npu is missing"),
])
def test_bad_result_exits_2_with_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "cmp.json"
    if content is not None:
        path.write_text(content)
    assert main(["serve", str(path), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("graphcmp: error:")


def test_busy_port_exits_2(perturb_pair, capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["serve", str(perturb_pair[0]), str(perturb_pair[1]), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"127.0.0.1:{port}" in err[0]


def test_compare_never_imports_dash(perturb_pair, tmp_path):
    code = ("import sys; from graphcmp.cli.main import main; "
            f"main(['compare', {str(perturb_pair[0])!r}, {str(perturb_pair[1])!r}, '-o', {str(tmp_path / 'c.json')!r},"
            " '-q']); assert not [m for m in sys.modules if m.split('.')[0] in ('dash', 'dash_cytoscape', 'flask')],"
            " 'dash loaded'")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_demo_without_a_terminal_does_not_prompt(tmp_path):
    out = subprocess.run([sys.executable, "-m", "graphcmp", "demo", "-o", str(tmp_path / "d.json")],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Open the browser viewer" not in out.stdout  # the sample runs differ
    assert f"graphcmp serve {tmp_path / 'd.json'}" in out.stderr


def test_serving_two_dump_folders_starts_the_reader_build_when_it_is_missing(perturb_pair, monkeypatch, capsys):
    """The viewer compares two dump folders itself: until the compiled reader is built it reads them by the chunked
    read, so it starts the build once it serves, as `compare` does when it ends."""
    from graphcmp.app import server
    from graphcmp.core.readers import msprobe_scan

    class _Served:
        url = "http://127.0.0.1:0/"

        def serve_forever(self):
            raise KeyboardInterrupt

    started = []
    monkeypatch.setattr(server, "start_server", lambda app, host, port: _Served())
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    monkeypatch.setattr(msprobe_scan._KERNELS, "buildable", lambda: True)
    assert main(["serve", str(perturb_pair[0]), str(perturb_pair[1]), "--port", "0"]) == 0
    assert started == ["graphcmp.core.readers.msprobe_scan:build_kernels"]
    assert "viewer stopped" in capsys.readouterr().err
