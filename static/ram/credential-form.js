// The Vault form: the one-time invite comes in the fragment, leaves the address
// bar at once, and is sent only in a request header of the single save.
(function () {
  let invite = new URLSearchParams(window.location.hash.slice(1)).get("invite");
  history.replaceState(null, "", window.location.pathname);
  const form = document.getElementById("credential-form");
  const status = document.getElementById("form-status");
  const saved = document.getElementById("saved-panel");
  if (!form) return;
  const button = document.getElementById("save-button");
  const say = function (text, kind) {
    status.textContent = text;
    status.className = kind;
  };
  if (!invite) {
    button.disabled = true;
    say(form.dataset.noInvite || "This form has no invite. Open it from the task's intervention page; if it was already opened, use that window, or cancel the task and ask for a new request.", "error");
    return;
  }
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const username = form.elements.username.value;
    const password = form.elements.password.value;
    const totp = form.elements.totp_secret.value.trim();
    if (!username.trim() || !password) {
      say("Enter the username and the password.", "error");
      return;
    }
    const body = { username: username, password: password };
    if (totp) body.totp_secret = totp;
    const replace = document.getElementById("replace-existing");
    if (replace && replace.checked) body.replace_existing = true;
    button.disabled = true;
    say("Saving…", "muted");
    let response;
    try {
      response = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        redirect: "error",
        // Same-origin policy for this request only: the exact Origin is sent, and no Referer.
        referrer: "",
        referrerPolicy: "same-origin",
        cache: "no-store",
        headers: {
          "Content-Type": "application/json",
          "X-CSRFToken": form.elements.csrfmiddlewaretoken.value,
          "X-RAM-Invite": invite,
        },
        body: JSON.stringify(body),
      });
    } catch (err) {
      // The outcome is unknown: never repeat the save automatically.
      say("The answer was lost. Check the task's intervention page before doing anything else.", "error");
      return;
    }
    let data = {};
    try { data = await response.json(); } catch (err) { data = {}; }
    if (response.ok) {
      invite = null;
      form.reset();
      form.hidden = true;
      say("", "");
      saved.hidden = false;
      saved.querySelector("p").focus();
      return;
    }
    say(data.error || "The credential was not saved.", "error");
    // Only a refused input (nothing reached the vault) may be corrected and sent again.
    if (response.status === 400) button.disabled = false;
    else invite = null;
  });
})();
