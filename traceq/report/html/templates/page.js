(function () {
  "use strict";
  // The text paints first: plotly.js (packed, see page.py) is unpacked and run, and the charts
  // drawn one per task, only after the browser has had a frame to paint the page.
  var payload = JSON.parse(document.getElementById("traceq-figures").textContent);
  var ids = Object.keys(payload.figures).sort();

  function fallback(why) {
    ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (!el) { return; }
      el.textContent = "This chart needs plotly.js, which " + why + "; the tables hold the same numbers.";
      el.className += " fallback";
    });
  }

  function unpack(packed) {
    var text = window.atob(packed.textContent);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    // Blob.stream and Response read memory: no request leaves the page.
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (source) {
      // (the browser test reads it: the text must have painted before plotly.js runs)
      if (window.performance && performance.mark) { performance.mark("traceq-plotly-run"); }
      var script = document.createElement("script");
      script.text = source;
      document.head.appendChild(script);
      script.remove();  // it has run; the page keeps its three script elements
    });
  }

  function draw(rest) {
    if (!rest.length) { zoomLinks(); document.documentElement.setAttribute("data-charts", "drawn"); return; }
    var id = rest[0];
    var el = document.getElementById(id);
    if (el) {
      var fig = payload.figures[id];
      // A responsive plot takes its height from its element when the window resizes: pin it.
      el.style.height = fig.layout.height + "px";
      window.Plotly.newPlot(el, fig.data, fig.layout, payload.config);
    }
    window.setTimeout(function () { draw(rest.slice(1)); }, 0);
  }

  // An evidence link names its gap's interval on the timeline (ms into the window): zoom there.
  function zoomLinks() {
    var chart = document.getElementById("chart-timeline");
    Array.prototype.forEach.call(document.querySelectorAll("a[data-zoom-ms]"), function (a) {
      a.addEventListener("click", function () {
        var span = a.getAttribute("data-zoom-ms").split(" ").map(Number);
        var pad = Math.max((span[1] - span[0]) * 0.5, 0.001);
        if (chart && chart.layout) {
          window.Plotly.relayout(chart, {"xaxis.range": [span[0] - pad, span[1] + pad]});
        }
      });
    });
  }

  function start() {
    if (!ids.length) { return; }
    var ready;
    if (typeof window.Plotly !== "undefined") {
      ready = Promise.resolve();
    } else {
      var packed = document.getElementById("traceq-plotly");
      if (!packed) { fallback("did not load"); return; }
      if (typeof DecompressionStream === "undefined") { fallback("this browser cannot unpack (DecompressionStream)"); return; }
      ready = unpack(packed);
    }
    ready.then(function () {
      if (typeof window.Plotly === "undefined") { fallback("did not load"); return; }
      draw(ids);
    });
  }

  // Paper is narrower than the screen: draw each chart at the printed width, then back.
  function printWidth(width) {
    ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (el && el.layout) { window.Plotly.relayout(el, width ? {width: width} : {width: null, autosize: true}); }
    });
  }
  window.addEventListener("beforeprint", function () { printWidth(680); });
  window.addEventListener("afterprint", function () { printWidth(0); });

  window.requestAnimationFrame(function () { window.setTimeout(start, 0); });
})();
