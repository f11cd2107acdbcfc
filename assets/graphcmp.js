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

  var READABLE = 0.85;  /* the smallest zoom a jump or a first paint leaves: 13 px labels stay 11 px or more */

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

  /* ---- the minimap: every node of the pane in small, and the part of it in view; click or drag to move there */
  function minimap(cy, side) {
    if (cy.scratch("_graphcmpMinimap")) { return; }
    var canvas = document.getElementById("minimap-" + side);
    if (!canvas) { return; }
    cy.scratch("_graphcmpMinimap", true);
    var queued = false, geo = null;
    function draw() {
      queued = false;
      var ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
      ctx.clearRect(0, 0, W, H);
      var nodes = cy.nodes();
      canvas.style.display = nodes.length ? "" : "none";
      if (!nodes.length) { geo = null; return; }
      var bb = nodes.boundingBox({includeLabels: false});
      var scale = Math.min((W - 8) / Math.max(bb.w, 1), (H - 8) / Math.max(bb.h, 1));
      var ox = (W - bb.w * scale) / 2 - bb.x1 * scale, oy = (H - bb.h * scale) / 2 - bb.y1 * scale;
      geo = {scale: scale, ox: ox, oy: oy};
      nodes.forEach(function (n) {
        var b = n.boundingBox({includeLabels: false, includeOverlays: false});
        var x = b.x1 * scale + ox, y = b.y1 * scale + oy, w = Math.max(b.w * scale, 1), h = Math.max(b.h * scale, 1);
        if (n.isParent()) { ctx.strokeStyle = n.data("color") || "#90a4ae"; ctx.strokeRect(x, y, w, h); }
        else { ctx.fillStyle = n.hasClass("origin") ? "#b71c1c" : (n.data("color") || "#b0bec5"); ctx.fillRect(x, y, w, h); }
      });
      var ext = cy.extent();
      ctx.strokeStyle = "#0d47a1"; ctx.lineWidth = 2;
      ctx.strokeRect(ext.x1 * scale + ox, ext.y1 * scale + oy, ext.w * scale, ext.h * scale);
      ctx.lineWidth = 1;
    }
    function later() { if (!queued) { queued = true; window.requestAnimationFrame(draw); } }
    cy.on("viewport resize add remove position", later);
    function moveTo(ev) {
      if (!geo) { return; }
      var r = canvas.getBoundingClientRect();
      var mx = (ev.clientX - r.left) * canvas.width / r.width, my = (ev.clientY - r.top) * canvas.height / r.height;
      var x = (mx - geo.ox) / geo.scale, y = (my - geo.oy) / geo.scale, z = cy.zoom();
      cy.pan({x: cy.width() / 2 - x * z, y: cy.height() / 2 - y * z});
    }
    var dragging = false;
    canvas.addEventListener("mousedown", function (ev) { dragging = true; moveTo(ev); ev.preventDefault(); });
    window.addEventListener("mousemove", function (ev) { if (dragging) { moveTo(ev); } });
    window.addEventListener("mouseup", function () { dragging = false; });
    later();
  }

  /* ---- an edge shows its tensor (dtype and shape) while the pointer is on it */
  function edgeHover(cy) {
    if (cy.scratch("_graphcmpHover")) { return; }
    cy.scratch("_graphcmpHover", true);
    cy.on("mouseover", "edge", function (ev) { ev.target.addClass("hover"); });
    cy.on("mouseout", "edge", function (ev) { ev.target.removeClass("hover"); });
  }

  function apply(focus, tries) {
    var pending = false;
    Object.keys(PANES).forEach(function (side) {
      var cy = cyOf(side);
      if (!cy) { return; }
      quiet(cy);
      minimap(cy, side);
      edgeHover(cy);
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

  /* ---- zoom to fit: the whole pane in view (the "fit" button of each pane) */
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("button.fit") : null;
    if (!button) { return; }
    var cy = cyOf(button.getAttribute("data-side"));
    if (cy) { cy.resize(); cy.fit(undefined, 20); }
  });

  /* ---- the sidebar and the bottom panel resized by dragging their grips; the size goes to the URL through the
     "sizes" store (the view callback keeps it in the state), the panes are resized as it moves */
  function resizeAll() { Object.keys(PANES).forEach(function (side) { var cy = cyOf(side); if (cy) { cy.resize(); } }); }
  document.addEventListener("mousedown", function (ev) {
    var grip = ev.target;
    if (!grip || (grip.id !== "sidebar-grip" && grip.id !== "bottom-grip")) { return; }
    var wide = grip.id === "sidebar-grip";
    var panel = document.getElementById(wide ? "sidebar" : "bottom");
    if (!panel) { return; }
    ev.preventDefault();
    grip.classList.add("dragging");
    var size = null;
    function move(e) {
      var r = panel.getBoundingClientRect();
      size = Math.round(wide ? e.clientX - r.left : r.bottom - e.clientY);
      size = Math.max(wide ? 160 : 80, Math.min(900, size));
      panel.style[wide ? "width" : "height"] = size + "px";
      panel.style.flex = "0 0 " + size + "px";
      resizeAll();
    }
    function up() {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      grip.classList.remove("dragging");
      if (size !== null && window.dash_clientside && window.dash_clientside.set_props) {
        var data = {}; data[wide ? "sidebar" : "bottom"] = size;
        window.dash_clientside.set_props("sizes", {data: data});
      }
      resizeAll();
    }
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  });

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
    zoom: function (side) { var cy = cyOf(side); return cy ? cy.zoom() : null; },
    inView: function (side) {  /* how many nodes lie entirely inside the pane's view, and how many there are */
      var cy = cyOf(side); if (!cy) { return null; }
      var ext = cy.extent(), n = 0;
      cy.nodes().forEach(function (node) { var b = node.boundingBox({includeLabels: false});
        if (b.x1 >= ext.x1 - 1 && b.x2 <= ext.x2 + 1 && b.y1 >= ext.y1 - 1 && b.y2 <= ext.y2 + 1) { n += 1; } });
      return {inside: n, total: cy.nodes().length};
    },
    edgeInfo: function (side) { var cy = cyOf(side); return cy ? cy.edges().map(function (e) { return e.data("info"); }) : []; },
    hoverEdge: function (side, k) {  /* the label an edge shows under the pointer (cytoscape's mouseover, as a pointer sends it) */
      var cy = cyOf(side); var e = cy && cy.edges()[k]; if (!e) { return null; }
      e.emit("mouseover"); var shown = e.style("label"); e.emit("mouseout"); return shown;
    },
    paneHeight: function (side) { var el = document.getElementById(PANES[side]); return el ? el.getBoundingClientRect().height : 0; }
  };
})();
