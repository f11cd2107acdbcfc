/* graphcmp viewer: select and reveal the focused nodes in both panes (clientside part of the app).
   The server sends {npu: "n12", bench: "n40", fit: bool, seq}; node ids are rows, never user names. */
(function () {
  "use strict";
  var PANES = {npu: "cy-npu", bench: "cy-bench"};

  function cyOf(side) {
    var el = document.getElementById(PANES[side] || side);
    return el && el._cyreg ? el._cyreg.cy : null;
  }

  function reveal(cy, node) {
    var bb = node.renderedBoundingBox(), w = cy.width(), h = cy.height(), m = 30;
    if (bb.x1 >= 0 && bb.y1 >= 0 && bb.x2 <= w && bb.y2 <= h) { return; }
    if (bb.w > w - 2 * m || bb.h > h - 2 * m) {
      var pan = cy.pan();
      cy.pan({x: pan.x - bb.x1 + m, y: pan.y - bb.y1 + m});
    } else {
      cy.center(node);
    }
  }

  var READABLE = 0.75;  /* the smallest zoom a jump or a first paint leaves: 12 px labels stay 9 px or more */

  function centre(cy, node) {
    if (cy.zoom() < READABLE) { cy.zoom(1); }  /* zoom to the selection when the pane shows too much to read */
    var bb = node.renderedBoundingBox({includeLabels: false}), w = cy.width(), h = cy.height();
    if (bb.w > w - 60 || bb.h > h - 60) { var pan = cy.pan(); cy.pan({x: pan.x - bb.x1 + 30, y: pan.y - bb.y1 + 30}); }
    else { cy.center(node); }
  }

  function fit(cy) {
    cy.fit(undefined, 30);
    if (cy.zoom() > 1.2) { cy.zoom(1.2); cy.center(); }
    if (cy.zoom() < READABLE) {  /* too big to read whole: readable, the top of the graph centred across */
      cy.zoom(READABLE);
      var bb = cy.elements().boundingBox();
      cy.pan({x: cy.width() / 2 - READABLE * (bb.x1 + bb.x2) / 2, y: 30 - READABLE * bb.y1});
    }
  }

  /* dash-cytoscape mirrors every element change, hover, selection and viewport move back into Dash
     props (elements, mouseoverNodeData, selectedNodeData, extent). The viewer reads none of them: it only
     listens to taps. With thousands of elements that round trip costs more than the update itself, so
     those listeners are removed once per pane; the tap listener that the viewer uses stays. */
  function quiet(cy) {
    if (cy.scratch("_graphcmpQuiet")) { return; }
    ["dragfree add remove", "add remove", "mouseover", "mouseout", "select", "unselect remove",
     "resize viewport"].forEach(function (events) { cy.removeListener(events); });
    cy.scratch("_graphcmpQuiet", true);
  }

  function apply(focus, tries) {
    var pending = false;
    Object.keys(PANES).forEach(function (side) {
      var cy = cyOf(side);
      if (!cy) { return; }
      quiet(cy);
      cy.resize();  /* the container may have changed size since cytoscape measured it (a pane shown or hidden) */
      var id = focus[side];
      if (focus.fit) {
        if (cy.nodes().length === 0) { pending = pending || side === "npu"; return; }
        fit(cy);
      }
      if (id) {
        var node = cy.getElementById(id);
        if (node.empty()) { pending = true; return; }
        cy.batch(function () { cy.$(":selected").unselect(); node.select(); });
        if (focus.center) { centre(cy, node); } else { reveal(cy, node); }
      } else if (!focus.fit) {
        cy.$(":selected").unselect();
      }
    });
    if (pending && tries < 40) {
      setTimeout(function () { apply(focus, tries + 1); }, 50);
    }
  }

  /* Applied at once, not on the next animation frame: the panes' elements are already in cytoscape when the
     focus arrives, so selecting and centring before cytoscape's next frame draws the page once, not twice. */
  window.graphcmpFocus = function (focus) {
    if (!focus) { return null; }
    apply(focus, 0);
    return focus.seq;
  };

  /* For tests and the benchmark: plain values only. */
  window.graphcmp = {
    cy: cyOf,
    nodeIds: function (side) { var cy = cyOf(side); return cy ? cy.nodes().map(function (n) { return n.id(); }) : []; },
    count: function (side) { var cy = cyOf(side); return cy ? cy.elements().length : 0; },
    selected: function (side) { var cy = cyOf(side); return cy ? cy.$("node:selected").map(function (n) { return n.id(); }) : []; },
    screenPos: function (side, id) {
      var cy = cyOf(side); if (!cy) { return null; }
      var n = cy.getElementById(id); if (n.empty()) { return null; }
      var box = document.getElementById(PANES[side]).getBoundingClientRect();
      var bb = n.renderedBoundingBox({includeLabels: false, includeOverlays: false});
      var p = n.isParent() ? {x: bb.x1 + 4, y: Math.max(bb.y1, 0) + 40} : n.renderedPosition();  // box: its left padding
      return {x: box.left + p.x, y: box.top + p.y, visible: p.x > 0 && p.y > 0 && p.x < box.width && p.y < box.height};
    },
    show: function (side, id) { var cy = cyOf(side); if (cy) { cy.resize(); } var n = cy && cy.getElementById(id); if (n && !n.empty()) { reveal(cy, n); } return true; },
    label: function (side, id) { var cy = cyOf(side); var n = cy && cy.getElementById(id); return n && !n.empty() ? n.data("label") : null; },
    shownLabel: function (side, id) { var cy = cyOf(side); var n = cy && cy.getElementById(id); return n && !n.empty() ? n.style("label") : null; },
    classes: function (side, id) { var cy = cyOf(side); var n = cy && cy.getElementById(id); return n && !n.empty() ? n.classes() : null; },
    edges: function (side) { var cy = cyOf(side); return cy ? cy.edges().map(function (e) { return [e.source().id(), e.target().id(), e.classes()]; }) : []; },
    shownLabels: function (side) { var cy = cyOf(side); return cy ? cy.nodes().map(function (n) { return n.style("label"); }) : []; },
    zoom: function (side) { var cy = cyOf(side); return cy ? cy.zoom() : null; }
  };
})();
