// Move the one-time token from the fragment into the form, and out of the address bar.
(function () {
  const params = new URLSearchParams(window.location.hash.slice(1));
  const token = params.get("token");
  history.replaceState(null, "", window.location.pathname);
  const field = document.getElementById("delegated-token");
  if (field && token) field.value = token;
})();
