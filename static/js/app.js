// Small behaviours shared by the pages: the upload drop zone and accessible tabs.

function setupDropzones() {
  for (const zone of document.querySelectorAll("[data-dropzone]")) {
    const input = zone.querySelector("input[type=file]");
    const list = zone.querySelector(".files");
    const show = () => {
      const names = [...input.files].map((f) => `${f.name} (${Math.ceil(f.size / 1024)} KiB)`);
      list.textContent = names.length ? names.join(" · ") : "";
    };
    input.addEventListener("change", show);
    for (const type of ["dragenter", "dragover"]) {
      zone.addEventListener(type, (ev) => {
        ev.preventDefault();
        zone.classList.add("over");
      });
    }
    for (const type of ["dragleave", "drop"]) {
      zone.addEventListener(type, () => zone.classList.remove("over"));
    }
    zone.addEventListener("drop", (ev) => {
      ev.preventDefault();
      if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
      // Merge dropped files with any already chosen: a snapshot is often several files.
      const merged = new DataTransfer();
      for (const f of input.files) merged.items.add(f);
      for (const f of ev.dataTransfer.files) merged.items.add(f);
      input.files = merged.files;
      show();
    });
  }
}

function setupTabs() {
  for (const list of document.querySelectorAll("[role=tablist]")) {
    const tabs = [...list.querySelectorAll("[role=tab]")];
    const select = (tab, focus = false, push = true) => {
      for (const t of tabs) {
        const on = t === tab;
        t.setAttribute("aria-selected", on ? "true" : "false");
        t.tabIndex = on ? 0 : -1;
        document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
      }
      if (focus) tab.focus();
      // Switching tabs far down a long section: bring the new section's top into view
      // (the tab bar is sticky, so measure the panel, not the bar).
      const panel = document.getElementById(tab.getAttribute("aria-controls"));
      const under = list.getBoundingClientRect().bottom;
      const panelTop = panel.getBoundingClientRect().top;
      if (panelTop < under) window.scrollBy({ top: panelTop - under - 8 });
      if (push) history.replaceState(null, "", `#${tab.dataset.tab}`);
      document.dispatchEvent(new CustomEvent("tab-shown", { detail: tab.dataset.tab }));
    };
    for (const tab of tabs) {
      tab.addEventListener("click", () => select(tab));
      tab.addEventListener("keydown", (ev) => {
        const at = tabs.indexOf(tab);
        let next = null;
        if (ev.key === "ArrowRight") next = tabs[(at + 1) % tabs.length];
        else if (ev.key === "ArrowLeft") next = tabs[(at - 1 + tabs.length) % tabs.length];
        else if (ev.key === "Home") next = tabs[0];
        else if (ev.key === "End") next = tabs[tabs.length - 1];
        if (next) {
          ev.preventDefault();
          select(next, true);
        }
      });
    }
    // Deep links: #tree, #pools ... or an anchor inside a tab (#pod-default-train-0), or a
    // search tree node (#node-123, revealed by tree.js). Followed on load and on hashchange
    // (a link to another pod or pool of the same page).
    const follow = (first) => {
      const hash = decodeURIComponent(window.location.hash.slice(1));
      let initial = tabs.find((t) => t.dataset.tab === hash);
      if (!initial && /^node-\d+$/.test(hash)) initial = tabs.find((t) => t.dataset.tab === "tree");
      // A device of a pool (#pool-DRIVER-POOL.DEVICE): its rows load when the pool is opened.
      if (!initial && hash && !document.getElementById(hash) && /^pool-[^.]+\.[^.]+$/.test(hash)) {
        const poolRow = document.getElementById(hash.split(".")[0]);
        const devices = poolRow && poolRow.nextElementSibling && poolRow.nextElementSibling.querySelector("details[hx-get]");
        if (devices) {
          const panel = poolRow.closest("[role=tabpanel]");
          select(tabs.find((t) => t.getAttribute("aria-controls") === panel.id), false, false);
          devices.dataset.wantDevice = hash.split(".")[1];
          if (!devices.open) devices.open = true; // htmx loads the rows (hx-trigger: toggle)
          poolRow.scrollIntoView();
          poolRow.classList.add("linked");
          return;
        }
      }
      if (!initial && hash) {
        const target = document.getElementById(hash);
        const panel = target && target.closest("[role=tabpanel]");
        if (panel) initial = tabs.find((t) => t.getAttribute("aria-controls") === panel.id);
        if (initial) {
          select(initial, false, false);
          for (let up = target; up; up = up.parentElement.closest("details")) {
            if (up.tagName === "DETAILS") up.open = true;
            if (!up.parentElement) break;
          }
          target.scrollIntoView();
          target.classList.add("linked");
          return;
        }
      }
      if (initial || first) select(initial || tabs[0], false, false);
    };
    follow(true);
    window.addEventListener("hashchange", () => follow(false));
  }
}

// Times are sent in UTC (<time datetime="...Z">); show them in the browser's zone, with the
// UTC time kept on hover.
function localTimes(root = document) {
  const pad = (n) => String(n).padStart(2, "0");
  for (const t of root.querySelectorAll("time[datetime]")) {
    if (t.dataset.local) continue;
    const when = new Date(t.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
    const date = `${when.getFullYear()}-${pad(when.getMonth() + 1)}-${pad(when.getDate())}`;
    const clock = `${pad(when.getHours())}:${pad(when.getMinutes())}`;
    const seconds = (t.dataset.format || "").includes("s") ? `:${pad(when.getSeconds())}` : "";
    // The zone's short name (EST, CET, GMT+9...) says which zone the time is in.
    let short = "";
    try {
      const part = new Intl.DateTimeFormat("en-US", { timeZoneName: "short" }).formatToParts(when).find((x) => x.type === "timeZoneName");
      short = part ? ` ${part.value}` : "";
    } catch (e) {
      short = "";
    }
    t.textContent = `${date} ${clock}${seconds}${short}`;
    t.title = `${t.title || t.getAttribute("datetime")} · shown in ${zone}`;
    t.dataset.local = zone;
  }
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard permission (plain http, old browser): select the text for Ctrl+C.
    const area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand && document.execCommand("copy");
    area.remove();
  }
  if (button) {
    const before = button.textContent;
    button.dataset.copied = text;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = before; }, 1500);
  }
}

// Copy buttons: [data-copy] copies the patch beside it, [data-copy-link] a stable link to
// an anchor of this page (or to the page itself).
function setupCopy() {
  document.addEventListener("click", (ev) => {
    const copy = ev.target.closest("[data-copy]");
    if (copy) {
      const body = copy.closest(".patch")?.querySelector(".patch-body") || document.getElementById(copy.dataset.copy);
      if (body) copyText(body.textContent, copy);
      ev.preventDefault();
      return;
    }
    const link = ev.target.closest("[data-copy-link]");
    if (link) {
      const anchor = link.dataset.copyLink || "";
      const url = `${window.location.origin}${window.location.pathname}${anchor}`;
      copyText(url, link);
      if (anchor) history.replaceState(null, "", anchor);
      ev.preventDefault();
    }
  });
}

localTimes();
document.addEventListener("htmx:afterSwap", (ev) => localTimes(ev.target));

// A link to one device of a pool: ask for it with the pool's rows, then show it.
document.addEventListener("htmx:configRequest", (ev) => {
  const want = ev.detail.elt && ev.detail.elt.dataset && ev.detail.elt.dataset.wantDevice;
  if (want) ev.detail.parameters.device = want;
});
document.addEventListener("htmx:afterSwap", (ev) => {
  const details = ev.target.closest && ev.target.closest("details[data-want-device]");
  if (!details) return;
  const hash = decodeURIComponent(window.location.hash.slice(1));
  const row = document.getElementById(hash);
  if (row) {
    row.classList.add("linked");
    row.scrollIntoView({ block: "center" });
  }
});
// A failed pod's explanation loads as it scrolls into view: when it lands above what a link
// scrolled to (#pod-..., marked .linked), the page scrolls by what it added, so the linked
// element stays where the link put it.
let linkedTop = null;
document.addEventListener("htmx:beforeSwap", (ev) => {
  const elt = ev.detail.elt;
  const linked = document.querySelector(".linked");
  linkedTop = null;
  if (!linked || !elt || !elt.matches || !elt.matches("[data-failure-explanation]")) return;
  if (elt.compareDocumentPosition(linked) & Node.DOCUMENT_POSITION_FOLLOWING) {
    linkedTop = linked.getBoundingClientRect().top;
  }
});
document.addEventListener("htmx:afterSwap", () => {
  const linked = linkedTop === null ? null : document.querySelector(".linked");
  if (linked) window.scrollBy(0, linked.getBoundingClientRect().top - linkedTop);
  linkedTop = null;
});
setupCopy();

setupDropzones();
setupTabs();
