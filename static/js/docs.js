/* /docs: start Swagger UI (served from the fastapi-offline package) on /openapi.json. A file of its
   own, not the inline script FastAPI's stock page uses, because the CSP allows no inline script. */
"use strict";

(() => {
  const root = document.getElementById("swagger-ui");
  root.replaceChildren();
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout", // no top bar: it would offer to load another site's spec
    deepLinking: true, // an opened endpoint is in the URL (#/model/kv_cache_api_kv_cache_get)
    showExtensions: true,
    showCommonExtensions: true, // minimum, maximum, maxLength, pattern beside every parameter
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0, // the schemas list starts closed: the endpoints come first
    validatorUrl: null, // the default fetches a badge from validator.swagger.io
  });
})();
