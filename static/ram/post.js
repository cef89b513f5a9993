// Every state-changing form posts through fetch so the request carries this
// site's exact Origin (pages use Referrer-Policy: no-referrer, under which a
// plain form post sends "Origin: null") and no Referer at all.
(function () {
  function showPage(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const main = doc.querySelector("main");
    const target = document.querySelector("main");
    if (main && target) {
      target.replaceWith(document.adoptNode(main));
    } else if (target) {
      const p = document.createElement("p");
      p.className = "error";
      p.setAttribute("role", "alert");
      p.textContent = (doc.body && doc.body.textContent.trim()) || "The request was refused.";
      target.replaceChildren(p);
    }
    if (doc.title) document.title = doc.title;
    const focus = document.querySelector("main h1, main [role=alert]");
    if (focus) { focus.setAttribute("tabindex", "-1"); focus.focus(); }
  }

  document.addEventListener("submit", async function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-ram-post")) return;
    event.preventDefault();
    const buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    let response;
    try {
      response = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form, event.submitter)),
        credentials: "same-origin",
        cache: "no-store",
        referrer: "",
        referrerPolicy: "same-origin",
        headers: { Accept: "application/json" },
      });
    } catch (err) {
      // The outcome is unknown: never repeat automatically.
      showPage("<main><p class='error' role='alert'>The answer was lost. Reload the page and check before trying again.</p></main>");
      return;
    }
    const type = response.headers.get("Content-Type") || "";
    if (type.startsWith("application/json")) {
      const data = await response.json();
      if (data.location) { window.location.assign(data.location); return; }
    }
    if (response.redirected) { window.location.assign(response.url); return; }
    showPage(await response.text());
  });
})();
