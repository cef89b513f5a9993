// Plain HTML forms do all the work; this only refuses a second submission of a
// form whose first one is still on its way (a double click, an impatient Enter).
// Nothing typed is cleared: the fields keep their values.
(function () {
  document.addEventListener("submit", function (event) {
    const form = event.target;
    // A form whose own script handles the submission (the Vault form) guards itself.
    if (!(form instanceof HTMLFormElement) || event.defaultPrevented) return;
    if (form.dataset.submitting === "1") {
      event.preventDefault();
      return;
    }
    form.dataset.submitting = "1";
    form.setAttribute("aria-busy", "true");
    form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (b) {
      b.setAttribute("aria-disabled", "true");
    });
  });
  // Coming back to the page (history, bfcache): the form can be used again.
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[data-submitting]").forEach(function (form) {
      delete form.dataset.submitting;
      form.removeAttribute("aria-busy");
      form.querySelectorAll("[aria-disabled]").forEach(function (b) { b.removeAttribute("aria-disabled"); });
    });
  });
})();
