(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("traceq-figures").textContent);
  var ids = Object.keys(payload.figures).sort();
  ids.forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    if (typeof window.Plotly === "undefined") {
      el.textContent = "This chart needs plotly.js, which did not load; the tables hold the same numbers.";
      el.className += " fallback";
      return;
    }
    var fig = payload.figures[id];
    // A responsive plot takes its height from its element when the window resizes: pin it.
    el.style.height = fig.layout.height + "px";
    window.Plotly.newPlot(el, fig.data, fig.layout, payload.config);
  });
})();
