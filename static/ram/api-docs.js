// /api/docs: Swagger UI (vendored, served from /static/) over the server's own OpenAPI document.
// A file rather than an inline script, so the site's content security policy holds unchanged.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.getAttribute("data-openapi-url"),
    domNode: root,
    deepLinking: true,
    // Never the public validator badge (it would load an image from another site).
    validatorUrl: null,
    // "Try it out" sends requests to this server only, with a key typed under Authorize.
    tryItOutEnabled: false,
    persistAuthorization: false,
  });
})();
