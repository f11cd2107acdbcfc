"""The browser viewer: a Dash app over comparison results (`graphcmp serve`).

The app imports only `graphcmp.core`: results are read with `load_document` or compared with
`compare_paths`; layout and visible elements are computed on the server (`layout`, `elements`).
"""

from __future__ import annotations

from dash import Dash

from graphcmp.app.callbacks import register_callbacks
from graphcmp.app.guard import guard_callbacks
from graphcmp.app.page import page_layout
from graphcmp.app.paths import assets_dir
from graphcmp.app.results import ResultSet, open_results
from graphcmp.app.viewer import Viewer

__all__ = ["ResultSet", "Viewer", "create_app", "open_results"]


def create_app(results: ResultSet) -> Dash:
    """A Dash app serving `results` (only these: the browser selects entries by key, never by path).

    Examples
    --------
    >>> from graphcmp.samples import sample_pair
    >>> app = create_app(open_results(sample_pair()))
    >>> app.title
    'graphcmp'
    """
    viewer = Viewer(results)
    viewer.prepare(results.start.key)
    app = Dash(__name__, title="graphcmp", assets_folder=str(assets_dir()), update_title=None,
               serve_locally=True)
    start = results.start
    app.layout = page_layout(start.title if len(results.entries) > 1 else start.source, job=results.job is not None,
                             paired=viewer.model(start.key).paired)
    register_callbacks(app, viewer)
    guard_callbacks(app)
    app.server.config["GRAPHCMP_VIEWER"] = viewer
    return app
