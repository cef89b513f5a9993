// Take the authorization answer out of the address bar, then post it (a GET consumes nothing).
(function () {
  history.replaceState(null, "", window.location.pathname);
  const form = document.getElementById("callback-form");
  if (form) form.requestSubmit();
})();
