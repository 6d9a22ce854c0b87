/* The API page: list every endpoint of /openapi.json with its query parameters, request fields and limits. */
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

  /** One table of fields: name (* = required), type and limits, description. */
  function fieldTable(spec, fields) {
    const table = ITT.element("table", null, "numbers fields");
    const head = document.createElement("tr");
    for (const key of ["docs.field", "docs.type", "docs.description"]) head.appendChild(ITT.element("th", ITT.t(key)));
    table.appendChild(head);
    for (const { name, schema, required, description } of fields) {
      const row = document.createElement("tr");
      row.appendChild(ITT.element("th", name + (required ? " *" : ""), "mono"));
      row.appendChild(ITT.element("td", describe(spec, schema), "mono"));
      row.appendChild(ITT.element("td", description || schema.description || ""));
      table.appendChild(row);
    }
    const scroll = ITT.element("div", null, "table-scroll");
    scroll.appendChild(table);
    return scroll;
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
        const query = (operation.parameters || []).filter((p) => p.in === "query");
        if (query.length) {
          section.appendChild(ITT.element("h3", ITT.t("docs.query")));
          section.appendChild(fieldTable(spec, query.map((p) => ({
            name: p.name, schema: p.schema || {}, required: p.required, description: p.description,
          }))));
        }
        const body = operation.requestBody && operation.requestBody.content["application/json"];
        if (body) {
          const schema = resolve(spec, body.schema);
          section.appendChild(ITT.element("h3", ITT.t("docs.body")));
          section.appendChild(fieldTable(spec, Object.entries(schema.properties || {}).map(([name, field]) => ({
            name, schema: field, required: (schema.required || []).includes(name),
          }))));
        }
        if (!query.length && !body) section.appendChild(ITT.element("p", ITT.t("docs.no_input"), "muted"));
        sections.push(section);
      }
    }
    root.replaceChildren(...sections);
  }

  load().catch((error) => ITT.showError(error.message));
})();
