/* The frame every page shares: on a phone the list of pages folds behind a menu button, and a
   long page opens with an "on this page" list of its sections, kept up to date as sections appear
   (several are hidden until the model's answer says they apply); a link or an address into a
   folded section (a closed <details>) opens it; some parts fold on a phone only. */
(() => {
  const toggle = document.getElementById("menu-toggle");
  const nav = document.getElementById("site-nav");

  function setMenu(open) {
    toggle.setAttribute("aria-expanded", String(open));
    document.body.classList.toggle("menu-open", open);
  }

  toggle.addEventListener("click", () => setMenu(toggle.getAttribute("aria-expanded") !== "true"));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("menu-open")) {
      setMenu(false);
      toggle.focus();
    }
  });
  nav.addEventListener("click", (event) => {
    if (event.target.closest("a")) setMenu(false);
  });

  // On a phone the parts marked data-fold-narrow (open on a wider screen) start folded, so their
  // headings read as one short list and a tap opens the one wanted.
  if (window.matchMedia("(max-width: 640px)").matches) {
    document.querySelectorAll("details[data-fold-narrow]").forEach((details) => { details.open = false; });
  }

  /** Open the folded sections around the address's #fragment (a link from elsewhere, a
      bookmark, going back), so the destination is shown rather than a closed heading. */
  function openTarget() {
    const id = decodeURIComponent(window.location.hash.slice(1));
    const target = id && document.getElementById(id);
    for (let details = target && target.closest("details"); details;
      details = details.parentElement && details.parentElement.closest("details")) {
      details.open = true;
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  const toc = document.getElementById("toc");
  if (!toc) return;
  const main = document.getElementById("main");
  const lead = main.querySelector(":scope > p.lead");
  if (lead) lead.after(toc); // below the page's title and introduction

  /** The page's top-level sections that are shown and have a heading with an id. */
  function sections() {
    return [...main.querySelectorAll(":scope > section.card, :scope > details.card")]
      .filter((section) => !section.hidden)
      .map((section) => section.querySelector("h2[id]"))
      .filter((heading) => heading && heading.textContent.trim());
  }

  let drawn = "";
  function draw() {
    const headings = sections();
    const key = headings.map((h) => `${h.id}\u0000${h.textContent}`).join("\u0001");
    if (key === drawn) return;
    drawn = key;
    const items = headings.map((heading) => {
      const link = document.createElement("a");
      link.href = `#${heading.id}`;
      link.textContent = heading.textContent.trim();
      link.addEventListener("click", () => {
        // a closed <details> opens when its heading is the destination
        const details = heading.closest("details");
        if (details && !details.open) details.open = true;
      });
      const item = document.createElement("li");
      item.appendChild(link);
      return item;
    });
    toc.querySelector("ol").replaceChildren(...items);
    toc.hidden = items.length < 3;
  }

  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; draw(); });
  }).observe(main, { subtree: true, attributes: true, attributeFilter: ["hidden"], childList: true,
    characterData: true });
  draw();
})();
