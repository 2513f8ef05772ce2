(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var sections = document.querySelectorAll("section.model");
  var allNodes = Array.prototype.slice.call(document.querySelectorAll("g.node"));

  Array.prototype.forEach.call(sections, function (section, number) {
    var model = data.models[number];
    var svg = section.querySelector("svg.lineage");
    var info = section.querySelector(".node-info");
    var nodes = new Map();
    var edges = new Map();
    section.querySelectorAll("g.node").forEach(function (node) {
      nodes.set(node.getAttribute("data-urn"), node);
    });
    section.querySelectorAll("g.edge").forEach(function (edge) {
      var key = edge.getAttribute("data-from") + "\u0000" + edge.getAttribute("data-to");
      if (!edges.has(key)) { edges.set(key, []); }
      edges.get(key).push(edge);
    });
    var full = svg.getAttribute("viewBox");
    var level = null;

    function clear() {
      section.querySelectorAll(".on-path").forEach(function (el) {
        el.classList.remove("on-path");
      });
      section.querySelectorAll("tr.finding.selected").forEach(function (row) {
        row.classList.remove("selected");
        row.setAttribute("aria-selected", "false");
      });
      section.classList.remove("has-selection");
    }

    function select(row, index) {
      var was = row.classList.contains("selected");
      clear();
      if (was) { return; }
      var path = model.findings[index].path;
      row.classList.add("selected");
      row.setAttribute("aria-selected", "true");
      section.classList.add("has-selection");
      path.forEach(function (urn, at) {
        var node = nodes.get(urn);
        if (node) { node.classList.add("on-path"); }
        if (at + 1 < path.length) {
          (edges.get(path[at + 1] + "\u0000" + urn) || []).forEach(function (edge) {
            edge.classList.add("on-path");
          });
        }
      });
      var hidden = path.some(function (urn) {
        var node = nodes.get(urn);
        return node && node.classList.contains("collapsed");
      });
      if (hidden) { collapse(null); }
      var entity = nodes.get(model.findings[index].entity);
      if (entity && entity.scrollIntoView) {
        entity.scrollIntoView({block: "nearest", inline: "nearest"});
      }
    }

    section.querySelectorAll("tr.finding").forEach(function (row, index) {
      row.addEventListener("click", function (event) {
        if (event.target.closest("a, details")) { return; }
        select(row, index);
      });
      row.addEventListener("keydown", function (event) {
        if (event.target !== row) { return; }  // a link's or the details' own keys
        if (event.key === "Enter" || event.key === " " || event.key === "Spacebar") {
          event.preventDefault();
          select(row, index);
        } else if (event.key === "Escape") {
          clear();
        }
      });
    });

    function describe(node) {
      var title = node.querySelector("title");
      info.textContent = title ? title.textContent.split("\n").join(" · ") : "";
    }
    nodes.forEach(function (node) {
      node.addEventListener("focus", function () { describe(node); });
      node.addEventListener("click", function () { describe(node); });
      node.addEventListener("keydown", function (event) {
        var link = node.querySelector("a[href]");
        if (event.key === "Enter" && link) {
          window.open(link.getAttribute("href"), "_blank", "noreferrer");
        }
      });
    });

    function collapse(upTo) {
      level = upTo;
      var deepest = null;
      section.querySelectorAll("button.collapse").forEach(function (button) {
        var n = Number(button.getAttribute("data-level"));
        deepest = deepest === null ? n : Math.max(deepest, n);
      });
      var shown = upTo === null ? deepest : upTo;
      section.querySelectorAll("g.node, g.edge").forEach(function (el) {
        var hide = upTo !== null && Number(el.getAttribute("data-level")) > upTo;
        el.classList.toggle("collapsed", hide);
      });
      section.querySelectorAll("button.collapse").forEach(function (button) {
        var n = Number(button.getAttribute("data-level"));
        button.setAttribute("aria-pressed", String(n === shown));
      });
      var view = upTo === null ? null : model.views[String(upTo)];
      if (view) {
        svg.setAttribute("viewBox", view.join(" "));
        svg.setAttribute("width", String(view[2]));
        svg.setAttribute("height", String(view[3]));
      } else {
        var box = full.split(" ");
        svg.setAttribute("viewBox", full);
        svg.setAttribute("width", box[2]);
        svg.setAttribute("height", box[3]);
      }
    }
    section.querySelectorAll("button.collapse").forEach(function (button) {
      button.addEventListener("click", function () {
        var n = Number(button.getAttribute("data-level"));
        var deepest = Number(button.parentNode.lastElementChild.getAttribute("data-level"));
        collapse(n >= deepest ? null : n);
      });
    });
    section.printRestore = function () { var at = level; return function () { collapse(at); }; };
    section.collapseTo = collapse;
    var opens = svg.getAttribute("data-open-level");
    if (opens !== null) { collapse(Number(opens)); }
    // The model is at the right: bring it into view in the scrolled graph.
    var root = nodes.get(model.urn);
    var frame = svg.parentNode;
    var scrolls = frame.scrollWidth > frame.clientWidth || frame.scrollHeight > frame.clientHeight;
    if (root && scrolls) {
      var at = root.getBoundingClientRect();
      var box = frame.getBoundingClientRect();
      frame.scrollLeft += at.left - box.left - (box.width - at.width) / 2;
      frame.scrollTop += at.top - box.top - (box.height - at.height) / 2;
    }
  });

  var search = document.querySelector("input.node-search");
  var found = document.getElementById("search-count");
  function mark() {
    var query = search.value.trim().toLowerCase();
    var hits = 0;
    allNodes.forEach(function (node) {
      var label = node.querySelector(".label");
      var text = (node.getAttribute("data-urn") + " " + (label ? label.textContent : ""));
      var hit = query !== "" && text.toLowerCase().indexOf(query) >= 0;
      node.classList.toggle("match", hit);
      if (hit) { hits += 1; }
    });
    found.textContent = query === "" ? "" : hits + (hits === 1 ? " node" : " nodes");
  }
  if (search) {
    search.addEventListener("input", mark);
    search.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") { return; }
      var first = document.querySelector("g.node.match");
      if (!first) { return; }
      if (first.classList.contains("collapsed")) {
        first.closest("section.model").collapseTo(null);
      }
      first.focus();
    });
  }

  var restore = [];
  window.addEventListener("beforeprint", function () {
    restore = Array.prototype.map.call(sections, function (section) {
      var back = section.printRestore();
      section.collapseTo(null);
      return back;
    });
    document.querySelectorAll("details:not([open])").forEach(function (details) {
      details.open = true;
      restore.push(function () { details.open = false; });
    });
  });
  window.addEventListener("afterprint", function () {
    restore.forEach(function (back) { back(); });
    restore = [];
  });
})();
