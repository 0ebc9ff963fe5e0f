// The explorer's page script: draws the loss charts (Chart.js, served from node_modules), loads
// the parts of a page computed on demand, and follows the live feed (/events): when a message
// names something this page shows (its <main data-live="job:5 chain">), the page's main part is
// fetched again (?fragment=1) and swapped in, without a reload.
"use strict";

function drawCharts(root) {
  for (const canvas of root.querySelectorAll("canvas[data-series]")) {
    const old = Chart.getChart(canvas);
    if (old) old.destroy();
    const series = JSON.parse(canvas.dataset.series);
    new Chart(canvas, {
      type: "line",
      data: {
        datasets: series.map((s, i) => ({
          label: s.label, data: s.points, showLine: true, pointRadius: 3,
          borderColor: ["#2563eb", "#dc2626", "#16a34a", "#9333ea"][i % 4],
          borderDash: i ? [6, 4] : [],
          backgroundColor: ["#2563eb", "#dc2626", "#16a34a", "#9333ea"][i % 4],
        })),
      },
      options: {
        animation: false, parsing: true, responsive: true, maintainAspectRatio: false,
        scales: {
          x: { type: "linear", title: { display: true, text: canvas.dataset.x } },
          y: { title: { display: true, text: canvas.dataset.y } },
        },
      },
    });
  }
}

async function loadParts(root) {
  for (const el of root.querySelectorAll("[data-load]")) {
    try {
      const res = await fetch(el.dataset.load);
      el.innerHTML = await res.text();
    } catch (e) {
      el.textContent = "could not load: " + e;
    }
  }
}

function wants(main, msg) {
  const live = (main.dataset.live || "").split(/\s+/);
  return live.includes(msg.kind) || live.includes(msg.kind + ":" + String(msg.id).toLowerCase());
}

let pending = null;
async function refresh() {
  pending = null;
  const url = new URL(window.location.href);
  url.searchParams.set("fragment", "1");
  try {
    const res = await fetch(url);
    const main = document.getElementById("main");
    main.innerHTML = await res.text();
    main.dataset.refreshed = String(Number(main.dataset.refreshed || 0) + 1);
    drawCharts(main);
    loadParts(main);
  } catch (e) {
    // the server is away: the next message retries
  }
}

function follow() {
  const main = document.getElementById("main");
  const feed = new EventSource("/events");
  feed.addEventListener("hello", () => { document.body.dataset.live = "on"; });
  feed.onmessage = (e) => {
    const msg = JSON.parse(e.data);
    if (wants(main, msg) && pending === null) pending = setTimeout(refresh, 250);
  };
  feed.onerror = () => { document.body.dataset.live = "reconnecting"; };
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("main");
  drawCharts(main);
  loadParts(main);
  follow();
});
