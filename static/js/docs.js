/* The API page: list every endpoint of /openapi.json with its request fields and limits. */
"use strict";

(() => {
  const LIMITS = ["minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "maxItems", "enum"];

  function resolve(spec, schema) {
    if (schema && schema.$ref) return spec.components.schemas[schema.$ref.split("/").pop()];
    return schema || {};
  }

  function describe(spec, schema) {
    const parts = [];
    const variants = schema.anyOf ? schema.anyOf.map((s) => resolve(spec, s)) : [resolve(spec, schema)];
    for (const variant of variants) {
      if (variant.type === "null") continue;
      parts.push(variant.type || (variant.enum ? "enum" : "object"));
      for (const limit of LIMITS) {
        if (limit in variant) parts.push(`${limit}=${JSON.stringify(variant[limit])}`);
      }
      if ("const" in variant) parts.push(JSON.stringify(variant.const));
    }
    if ("default" in schema) parts.push(`default=${JSON.stringify(schema.default)}`);
    return parts.join(" ");
  }

  async function load() {
    const spec = await ITT.get("/openapi.json");
    const root = document.getElementById("endpoints");
    const sections = [];
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const section = ITT.element("section", null, "card");
        section.appendChild(ITT.element("h2", `${method.toUpperCase()} ${path}`, "mono"));
        section.appendChild(ITT.element("p", operation.description || operation.summary || ""));
        const body = operation.requestBody && operation.requestBody.content["application/json"];
        if (body) {
          const schema = resolve(spec, body.schema);
          const table = ITT.element("table", null, "numbers");
          for (const [name, field] of Object.entries(schema.properties || {})) {
            const row = document.createElement("tr");
            const required = (schema.required || []).includes(name) ? " *" : "";
            row.appendChild(ITT.element("th", name + required, "mono"));
            row.appendChild(ITT.element("td", describe(spec, field), "mono"));
            row.appendChild(ITT.element("td", field.description || ""));
            table.appendChild(row);
          }
          section.appendChild(table);
        }
        sections.push(section);
      }
    }
    root.replaceChildren(...sections);
  }

  load().catch((error) => ITT.showError(error.message));
})();
