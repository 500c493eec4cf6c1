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
    // Deep links: #tree, #pools ... or an anchor inside a tab (#pod-default-train-0).
    const hash = decodeURIComponent(window.location.hash.slice(1));
    let initial = tabs.find((t) => t.dataset.tab === hash);
    if (!initial && hash) {
      const target = document.getElementById(hash);
      const panel = target && target.closest("[role=tabpanel]");
      if (panel) initial = tabs.find((t) => t.getAttribute("aria-controls") === panel.id);
      if (initial) {
        select(initial, false, false);
        if (target.tagName === "DETAILS") target.open = true;
        target.scrollIntoView();
        continue;
      }
    }
    select(initial || tabs[0], false, false);
  }
}

setupDropzones();
setupTabs();
