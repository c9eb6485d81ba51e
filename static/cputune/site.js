// cputune pages: draw server-built Plotly figures and copy snippets. No framework; plotly.js is vendored.
"use strict";

function drawCharts() {
  if (!window.Plotly) return;
  document.querySelectorAll("[data-chart]").forEach(function (el) {
    var source = document.getElementById(el.dataset.chart);
    if (!source) return;
    var fig = JSON.parse(source.textContent);
    window.Plotly.newPlot(el, fig.data, fig.layout, {
      responsive: true,
      displaylogo: false,
      modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    });
  });
}

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Plain-HTTP deployments have no clipboard API: fall back to a selected textarea.
  var area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  try { document.execCommand("copy"); } finally { document.body.removeChild(area); }
  return Promise.resolve();
}

function wireCopyButtons() {
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      if (!source) return;
      copyText(source.textContent).then(function () {
        button.textContent = "Copied";
        button.classList.add("done");
        setTimeout(function () { button.textContent = "Copy"; button.classList.remove("done"); }, 1500);
      });
    });
  });
}

document.addEventListener("DOMContentLoaded", function () {
  drawCharts();
  wireCopyButtons();
});
