// The forecast page: the form's days go to the server, its summary is shown.
const form = document.getElementById("forecast");
const out = document.getElementById("summary");

function shown(s) {
  return `Forecast for ${s.days} day${s.days === 1 ? "" : "s"}: total ${s.total.toFixed(1)}, ` +
    `peak ${s.peak.toFixed(2)} on day ${s.peak_day}`;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  out.textContent = "…";
  const days = Number(document.getElementById("days").value);
  try {
    const r = await fetch("/api/horizon", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({days}),
    });
    out.textContent = r.ok ? shown(await r.json()) : "Something went wrong, try again later";
  } catch (e) {
    out.textContent = "Something went wrong, try again later";
  }
});
