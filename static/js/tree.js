// The search tree: an ARIA tree over a run's DFS trace, loaded a subtree at a time.
//
// The server holds the whole trace; the page asks for one node's children (paginated), a
// node's details, a search, or the icicle overview. So a 100,000-node trace paints as fast
// as a 100-node one. Keyboard: Up/Down move, Right expands or enters, Left collapses or goes
// to the parent, Home/End, Enter toggles and shows details.

const PAGE = 200;
const AUTO_EXPAND_BUDGET = 200; // nodes of successful paths opened at first paint

function el(tag, attrs = {}, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined) node.append(kid);
  return node;
}

function nodesOf(payload) {
  if (Array.isArray(payload)) return payload;
  return payload.nodes || payload.results || payload.children || [];
}

function childCountOf(n) {
  if (typeof n.childCount === "number") return n.childCount;
  if (typeof n.childrenCount === "number") return n.childrenCount;
  if (typeof n.children === "number") return n.children;
  if (n.hasChildren) return 1;
  return 0;
}

// A new NodeClaim's attempt is labelled "nodepool/POOL (new NAME)" by the trace, with NAME
// the name it would get. One naming on every page: the attempt that created a NodeClaim of
// the run (status ok) reads "nodeclaim/NAME (new, nodepool/POOL)" as everywhere else; an
// attempt that failed created nothing, even when a later pod's NodeClaim got the same name,
// so its candidate name is not shown.
const NEW_TARGET = /^nodepool\/(\S+) \(new ([^)]+)\)$/;

export function displayLabel(n, parentLabel, nodeClaims) {
  const label = n.label || "";
  const m = NEW_TARGET.exec(label);
  if (m) {
    const created = (n.status || "ok") === "ok" && nodeClaims.has(m[2]);
    return created ? `nodeclaim/${m[2]} (new, nodepool/${m[1]})` : `nodepool/${m[1]} (a new NodeClaim, not launched)`;
  }
  if (label) return label;
  if (n.kind === "instanceType") {
    if (n.instanceType) return n.instanceType;
    return parentLabel ? `devices of ${parentLabel}` : "the node's own devices";
  }
  return n.claim || n.request || n.nodeClaim || n.node || `#${n.id}`;
}

async function getJSON(url) {
  const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!res.ok) throw new Error(`${res.status} ${res.statusText} for ${url}`);
  return res.json();
}

export class SearchTree {
  constructor(root) {
    this.root = root;
    this.childrenUrl = root.dataset.childrenUrl; // first page: GET ?parent=&offset=&limit=&expand=
    this.apiUrl = root.dataset.apiUrl; // the runs API's trace: GET ?parent=ID&page=&page_size=
    this.nodeUrl = root.dataset.nodeUrl; // + ID + "/"
    this.searchUrl = root.dataset.searchUrl;
    this.overviewUrl = root.dataset.overviewUrl;
    this.revealUrl = root.dataset.revealUrl; // + ID + "/"
    this.treeEl = root.querySelector("[role=tree]");
    this.detailEl = root.querySelector(".node-detail-body");
    this.resultsEl = root.querySelector(".search-results");
    this.statusEl = root.querySelector(".tree-status");
    this.items = new Map(); // id -> li
    this.nodeClaims = new Set(JSON.parse(root.dataset.nodeClaims || "[]"));
    this.paintedAt = null;
  }

  async start() {
    const t0 = performance.now();
    await this.loadChildren(null, this.treeEl, 0, 0, true);
    this.paintedAt = performance.now() - t0;
    this.root.dataset.firstPaintMs = String(Math.round(this.paintedAt));
    this.root.dataset.ready = "true";
    this.bindKeys();
    this.bindToolbar();
    if (this.overviewUrl) this.drawOverview().catch((e) => this.say(`overview: ${e.message}`));
    // A link to a node (#node-123) opens the tree at it; so does following one later.
    const follow = () => {
      const m = /^#node-(\d+)$/.exec(window.location.hash);
      if (m) this.reveal(Number(m[1])).catch((e) => this.say(`could not open node ${m[1]}: ${e.message}`));
    };
    follow();
    window.addEventListener("hashchange", follow);
  }

  say(text) {
    if (this.statusEl) this.statusEl.textContent = text;
  }

  url(base, params) {
    const u = new URL(base, window.location.origin);
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") u.searchParams.set(k, v);
    return u.toString();
  }

  // --- rendering --------------------------------------------------------------------------

  makeItem(n, level, parentLi = null) {
    const count = childCountOf(n);
    const parentLabel = parentLi ? parentLi._display : "";
    const display = displayLabel(n, parentLabel, this.nodeClaims);
    const li = el("li", {
      role: "treeitem",
      "aria-level": String(level + 1),
      "aria-expanded": count ? "false" : null,
      "aria-selected": "false",
      tabindex: "-1",
      class: `st-${n.status || "ok"}`,
      "data-id": String(n.id),
      "data-kind": n.kind || "",
    });
    // Subtree size: "descendants" (the runs API) or "size" (the node itself included).
    const below = typeof n.descendants === "number" ? n.descendants : typeof n.size === "number" ? n.size - 1 : null;
    const failedBelow = typeof n.failedDescendants === "number" ? n.failedDescendants : null;
    const sizeText = count && below ? `${below.toLocaleString()} below${failedBelow ? `, ${failedBelow.toLocaleString()} failed` : ""}` : null;
    const row = el(
      "div",
      { class: "row", title: n.message || n.reason || "" },
      el("span", { class: "twisty", "aria-hidden": "true", text: count ? "▸" : "" }),
      el("span", { class: "status-dot", "aria-hidden": "true" }),
      el("span", { class: "kind", text: n.kind || "" }),
      el("span", { class: "label", text: display }),
      // A target standing for several refused alike (docs/TRACE.md: targets, exampleTargets).
      n.targets > 1 ? el("span", { class: "alike tag", title: (n.exampleTargets || []).join(", "), text: `+${(n.targets - 1).toLocaleString()} alike` }) : null,
      n.pass ? el("span", { class: "pass tag", text: `pass ${n.pass}` }) : null,
      n.status !== "ok" && n.reason ? el("span", { class: "reason", text: n.reason }) : null,
      sizeText ? el("span", { class: "size", text: `(${sizeText})` }) : null,
    );
    row.addEventListener("click", (ev) => {
      ev.stopPropagation();
      this.focus(li);
      if (count && ev.target.classList.contains("twisty")) this.toggle(li);
      else {
        this.showDetail(li);
        if (count && li.getAttribute("aria-expanded") === "false") this.toggle(li);
      }
    });
    li.append(row);
    li._node = n;
    li._level = level;
    li._display = display;
    this.items.set(n.id, li);
    return li;
  }

  async loadChildren(parentId, container, level, offset, first = false) {
    let payload;
    const prefetch = window.treePrefetch;
    if (first && parentId === null && offset === 0 && prefetch && prefetch.url.endsWith(`expand=${AUTO_EXPAND_BUDGET}`)) {
      window.treePrefetch = null; // use it once
      payload = await prefetch.data;
    }
    if (payload) {
      // the page's head already asked for it
    } else if (first || !this.apiUrl || parentId === null) {
      // Roots always come from the page's own endpoint: it labels each pod's retry pass.
      // The first page opens the successful paths server-side, in one round trip.
      const params = { parent: parentId === null ? "" : parentId, offset, limit: PAGE };
      if (first) params.expand = AUTO_EXPAND_BUDGET;
      payload = await getJSON(this.url(this.childrenUrl, params));
    } else {
      // Subtrees on demand from the REST API: GET /api/runs/{id}/trace/?parent=ID (pages).
      const page = Math.floor(offset / PAGE) + 1;
      const data = await getJSON(this.url(this.apiUrl, { parent: parentId === null ? "root" : parentId, page, page_size: PAGE }));
      payload = { nodes: data.results || [], total: data.count, offset: (page - 1) * PAGE };
    }
    this.renderPage(parentId, container, level, payload, offset);
    if (container === this.treeEl && !this.treeEl.querySelector("[tabindex='0']")) {
      const top = this.treeEl.querySelector("[role=treeitem]");
      if (top) top.setAttribute("tabindex", "0");
    }
  }

  renderPage(parentId, container, level, payload, offset) {
    const nodes = nodesOf(payload);
    const total = typeof payload.total === "number" ? payload.total : nodes.length;
    const realOffset = typeof payload.offset === "number" ? payload.offset : offset;
    // "Earlier" only heads a list that starts mid-way, not one that already has its start.
    if (realOffset > 0 && !container.querySelector(":scope > li.more.earlier, :scope > [role=treeitem]")) {
      const earlier = el("li", { class: "more earlier", role: "none", text: `… ${realOffset.toLocaleString()} earlier — show` });
      earlier.addEventListener("click", async () => {
        earlier.remove();
        const start = Math.max(0, realOffset - PAGE);
        const holder = document.createElement("ul");
        await this.loadChildren(parentId, holder, level, start);
        const firstChild = container.firstChild;
        for (const child of [...holder.children]) {
          if (child.classList.contains("more") && !child.classList.contains("earlier")) continue;
          container.insertBefore(child, firstChild);
        }
      });
      container.append(earlier);
    }
    const frag = document.createDocumentFragment();
    const parentLi = parentId === null ? null : this.items.get(parentId) || null;
    for (const n of nodes) {
      if (this.items.has(n.id)) continue;
      const li = this.makeItem(n, level, parentLi);
      frag.append(li);
      if (Array.isArray(n.expanded)) {
        const { group } = this.markOpen(li);
        this.renderPage(n.id, group, level + 1, { nodes: n.expanded, total: childCountOf(n), offset: 0 }, 0);
      }
    }
    container.append(frag);
    const shown = realOffset + nodes.length;
    if (shown < total) {
      const more = el("li", { class: "more", role: "none", text: `… ${(total - shown).toLocaleString()} more — show next ${Math.min(PAGE, total - shown)}` });
      more.addEventListener("click", async () => {
        more.remove();
        await this.loadChildren(parentId, container, level, shown);
      });
      container.append(more);
    }
  }

  async expand(li, around = null) {
    if (li.getAttribute("aria-expanded") !== "false") return;
    const { group, fresh } = this.markOpen(li);
    if (fresh) {
      const offset = around === null ? 0 : Math.max(0, around - Math.floor(PAGE / 2));
      try {
        await this.loadChildren(li._node.id, group, li._level + 1, offset);
      } catch (e) {
        group.append(el("li", { role: "none", class: "more", text: `could not load: ${e.message}` }));
      }
    }
    group.hidden = false;
  }

  collapse(li) {
    if (li.getAttribute("aria-expanded") !== "true") return;
    li.setAttribute("aria-expanded", "false");
    li.querySelector(":scope > .row > .twisty").textContent = "▸";
    const group = li.querySelector(":scope > ul");
    if (group) group.hidden = true;
  }

  toggle(li) {
    if (li.getAttribute("aria-expanded") === "true") this.collapse(li);
    else return this.expand(li);
  }

  // --- focus and keys ----------------------------------------------------------------------

  visibleItems() {
    return [...this.treeEl.querySelectorAll("[role=treeitem]")].filter((li) => li.offsetParent !== null);
  }

  focus(li) {
    for (const other of this.treeEl.querySelectorAll("[tabindex='0']")) other.setAttribute("tabindex", "-1");
    for (const other of this.treeEl.querySelectorAll("[aria-selected='true']")) other.setAttribute("aria-selected", "false");
    li.setAttribute("tabindex", "0");
    li.setAttribute("aria-selected", "true");
    li.focus({ preventScroll: true });
    li.querySelector(":scope > .row").scrollIntoView({ block: "nearest" });
  }

  bindKeys() {
    this.treeEl.addEventListener("keydown", async (ev) => {
      const li = ev.target.closest("[role=treeitem]");
      if (!li) return;
      const items = this.visibleItems();
      const at = items.indexOf(li);
      const parentLi = li.parentElement.closest("[role=treeitem]");
      switch (ev.key) {
        case "ArrowDown":
          if (at < items.length - 1) this.focus(items[at + 1]);
          break;
        case "ArrowUp":
          if (at > 0) this.focus(items[at - 1]);
          break;
        case "ArrowRight":
          if (li.getAttribute("aria-expanded") === "false") await this.expand(li);
          else if (li.getAttribute("aria-expanded") === "true") {
            const child = li.querySelector(":scope > ul > [role=treeitem]");
            if (child) this.focus(child);
          }
          break;
        case "ArrowLeft":
          if (li.getAttribute("aria-expanded") === "true") this.collapse(li);
          else if (parentLi) this.focus(parentLi);
          break;
        case "Home":
          if (items.length) this.focus(items[0]);
          break;
        case "End":
          if (items.length) this.focus(items[items.length - 1]);
          break;
        case "Enter":
        case " ":
          this.showDetail(li);
          if (li.hasAttribute("aria-expanded")) await this.toggle(li);
          break;
        default:
          return;
      }
      ev.preventDefault();
    });
  }

  // --- details -------------------------------------------------------------------------------

  async showDetail(li) {
    const id = li._node.id;
    this.detailFor = id; // a slower answer for an earlier click must not overwrite this one
    this.detailEl.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
    let d;
    try {
      d = await getJSON(`${this.nodeUrl}${id}/`);
    } catch (e) {
      if (this.detailFor === id) this.detailEl.replaceChildren(el("p", { class: "upload-status error", text: e.message }));
      return;
    }
    if (this.detailFor !== id) return;
    const dl = el("dl", { class: "kv" });
    const add = (k, v) => {
      if (v === null || v === undefined || v === "") return;
      dl.append(el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v)));
    };
    const link = `${window.location.origin}${window.location.pathname}#node-${d.id}`;
    add("node", `#${d.id} ${d.kind}`);
    add("label", li._display || d.label);
    if (li._display && d.label && li._display !== d.label) add("trace label", d.label);
    if (li._node.pass) add("retry pass", li._node.pass);
    add(
      "link",
      el("a", {
        href: `#node-${d.id}`,
        class: "node-link",
        "data-copy-link": `#node-${d.id}`,
        title: "Copy a link that opens the tree at this node",
        text: link,
      }),
    );
    add("status", el("span", { class: `badge ${d.status}`, text: d.status }));
    add("reason", d.reason);
    add("message", d.message ? el("code", { text: d.message }) : null);
    add("children", d.childCount);
    add("below", d.descendants);
    const skip = new Set(["id", "parent", "kind", "label", "status", "reason", "message", "childCount", "size", "depth", "path", "device_info", "intent", "descendants", "failedDescendants", "funnel", "pass"]);
    for (const [k, v] of Object.entries(d)) {
      if (skip.has(k) || v === null || v === undefined) continue; // no "null" rows
      add(k, typeof v === "object" ? el("code", { text: JSON.stringify(v) }) : v);
    }
    const parts = [el("h3", { class: "mt0", text: li._display || d.label || `#${d.id}` }), dl];
    if (Array.isArray(d.funnel) && d.funnel.length) parts.push(...this.funnelTables(d.funnel));
    if (d.path && d.path.length) {
      const crumbs = el("ol", { class: "reasons" });
      for (const p of d.path) crumbs.append(el("li", {}, el("span", { class: "target", text: `${p.kind} ` }), displayLabel(p, "", this.nodeClaims)));
      parts.push(el("h3", { text: "Path" }), crumbs);
    }
    if (d.device_info) {
      const info = d.device_info;
      parts.push(el("h3", { text: `Device ${info.driver}/${info.pool}/${info.name || info.device || d.device || ""}` }));
      if (info.attributes) parts.push(el("pre", { class: "code", text: JSON.stringify(info.attributes, null, 2) }));
      if (info.capacity && Object.keys(info.capacity).length) parts.push(el("p", { class: "muted", text: "capacity" }), el("pre", { class: "code", text: JSON.stringify(info.capacity, null, 2) }));
      if (info.taints && info.taints.length) parts.push(el("p", { class: "muted", text: "taints" }), el("pre", { class: "code", text: JSON.stringify(info.taints, null, 2) }));
    }
    if (d.intent) {
      parts.push(el("h3", { text: `What ${d.intent.claim} asks for` }), el("p", { class: "muted", text: d.intent.source }));
      const requests = [];
      for (const r of d.intent.requests) {
        if (r.subrequests && r.subrequests.length) requests.push(...r.subrequests);
        else requests.push(r);
      }
      for (const r of requests) {
        const count = r.allocationMode === "All" ? "all matching" : `${r.count} ×`;
        parts.push(el("p", {}, el("strong", { class: "mono", text: r.name }), ` ${count} `, el("span", { class: "tag", text: r.deviceClassName || "" })));
        for (const sel of r.selectors || []) parts.push(el("pre", { class: "code cel", text: sel }));
      }
      for (const c of d.intent.constraints || []) {
        parts.push(el("p", {}, "constraint ", el("span", { class: "tag", text: `${c.kind} ${c.attribute}` }), ` over ${c.requests.join(", ")}`));
      }
    }
    if (d.selectors && d.selectors.length) {
      parts.push(el("h3", { text: "Selectors" }));
      for (const s of d.selectors) parts.push(el("pre", { class: "code cel", text: s }));
    }
    this.detailEl.replaceChildren(...parts);
  }

  // A node refused by counting carries the funnel of its refusal (docs/TRACE.md).
  funnelTables(funnels) {
    const out = [el("h3", { text: "Why the devices were refused" })];
    for (const f of funnels) {
      out.push(el("p", { class: "funnel-head" }, el("span", { class: "mono", text: f.claim || "" }), ` · request ${f.request || ""}${f.needed ? ` needs ${f.needed}` : ""} · ${f.usable ?? 0} of ${f.candidates ?? 0} usable${f.instanceType ? ` · ${f.instanceType}` : ""}`));
      if (f.message) out.push(el("p", { class: "error wrap", text: f.message }));
      const body = el("tbody");
      for (const r of f.rejections || []) {
        body.append(el("tr", {}, el("td", {}, el("span", { class: "badge muted reason-code", text: r.reason })), el("td", { class: "num", text: String(r.devices) }), el("td", { class: "wrap", text: r.message || "" }), el("td", { class: "mono", text: (r.exampleDevices || []).join("\n") })));
      }
      out.push(el("table", { class: "data compact funnel-table" }, el("thead", {}, el("tr", {}, el("th", { text: "Reason" }), el("th", { class: "num", text: "Devices" }), el("th", { text: "Why" }), el("th", { text: "Examples" }))), body));
    }
    return out;
  }

  // --- search, filter and reveal ------------------------------------------------------------

  bindToolbar() {
    const form = this.root.querySelector(".tree-toolbar");
    if (!form) return;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.search(form.elements.q.value, form.elements.reason.value);
    });
    form.elements.reason.addEventListener("change", () => this.search(form.elements.q.value, form.elements.reason.value));
    const collapse = this.root.querySelector(".collapse-all");
    if (collapse) collapse.addEventListener("click", () => {
      for (const li of this.treeEl.querySelectorAll("[aria-expanded='true']")) this.collapse(li);
    });
  }

  async search(q, reason) {
    for (const hit of this.treeEl.querySelectorAll(".hit")) hit.classList.remove("hit");
    if (!q && !reason) {
      this.resultsEl.replaceChildren();
      this.say("");
      return;
    }
    const data = await getJSON(this.url(this.searchUrl, { q, reason, limit: 100 }));
    const results = data.results || [];
    this.say(`${data.total.toLocaleString()} match${data.total === 1 ? "" : "es"}${data.total > results.length ? `, first ${results.length} listed` : ""}`);
    this.resultsEl.replaceChildren(
      ...results.map((r) =>
        el(
          "li",
          {},
          el("button", {
            type: "button",
            "data-id": String(r.id),
            text: `#${r.id} ${(r.pathLabels || []).slice(0, 2).map((l, i) => `${displayLabel({ label: l, status: (r.pathStatuses || [])[i] }, "", this.nodeClaims)} › `).join("")}${r.kind} ${displayLabel(r, "", this.nodeClaims)}${r.reason ? ` — ${r.reason}` : ""}`,
            title: (r.pathLabels || []).concat([r.label]).join(" › "),
            onclick: () => this.reveal(r.id),
          }),
        ),
      ),
    );
    if (results.length) await this.reveal(results[0].id);
  }

  markOpen(li) {
    // Open a node's twisty and give it a child group; fresh when the group had to be made.
    li.setAttribute("aria-expanded", "true");
    li.querySelector(":scope > .row > .twisty").textContent = "▾";
    let group = li.querySelector(":scope > ul");
    const fresh = !group;
    if (fresh) {
      group = el("ul", { role: "group" });
      li.append(group);
    }
    return { group, fresh };
  }

  openShell(li) {
    // Mark a node open with an empty group that the caller fills from a page it already has.
    const { group } = this.markOpen(li);
    group.hidden = false;
    return group;
  }

  async reveal(id) {
    let li = this.items.get(id);
    if (!li) {
      // One request: the path from the root, and for each step the page of its siblings.
      const chain = await getJSON(`${this.revealUrl}${id}/`);
      const steps = chain.path || chain;
      let parentLi = null;
      for (let k = 0; k < steps.length; k += 1) {
        const step = steps[k];
        let item = this.items.get(step.id);
        if (!item) {
          const container = parentLi ? this.openShell(parentLi) : this.treeEl;
          const level = parentLi ? parentLi._level + 1 : 0;
          for (const more of container.querySelectorAll(":scope > li.more")) more.remove();
          if (step.page) this.renderPage(parentLi ? parentLi._node.id : null, container, level, step.page, step.page.offset);
          else await this.loadChildren(parentLi ? parentLi._node.id : null, container, level, Math.max(0, step.index - Math.floor(PAGE / 2)));
          item = this.items.get(step.id);
        }
        if (!item) break;
        if (k < steps.length - 1 && item.getAttribute("aria-expanded") === "false") {
          if (item.querySelector(":scope > ul")) this.openShell(item);
          else if (!steps[k + 1].page) await this.expand(item, steps[k + 1].index >= PAGE ? steps[k + 1].index : null);
        }
        parentLi = item;
      }
      li = this.items.get(id);
    } else {
      let up = li.parentElement.closest("[role=treeitem]");
      while (up) {
        await this.expand(up);
        up = up.parentElement.closest("[role=treeitem]");
      }
    }
    if (li) {
      li.classList.add("hit");
      this.focus(li);
      // Keep the tree's own scroller on the match, in the middle, without moving the page.
      const row = li.querySelector(":scope > .row");
      this.treeEl.scrollTop += row.getBoundingClientRect().top - this.treeEl.getBoundingClientRect().top - this.treeEl.clientHeight / 2;
      this.showDetail(li);
    }
  }

  // --- icicle overview -------------------------------------------------------------------------

  async drawOverview() {
    const canvas = this.root.querySelector("canvas.icicle");
    if (!canvas) return;
    const data = await getJSON(this.overviewUrl);
    this.overview = data;
    const paint = () => {
      const ratio = window.devicePixelRatio || 1;
      const w = canvas.clientWidth;
      const h = canvas.clientHeight;
      if (!w || !h) return; // in a hidden tab: painted when the tab shows (ResizeObserver)
      canvas.width = Math.round(w * ratio);
      canvas.height = Math.round(h * ratio);
      const ctx = canvas.getContext("2d");
      ctx.scale(ratio, ratio);
      ctx.clearRect(0, 0, w, h);
      const rowH = h / Math.max(1, data.depth);
      const colors = { ok: "#3f9d67", failed: "#d05050", pruned: "#8a7cc4" };
      for (const [, depth, offset, size, status] of data.rects) {
        const x = (offset / data.total) * w;
        const rw = Math.max(0.5, (size / data.total) * w - 0.5);
        ctx.fillStyle = colors[status] || "#8895aa";
        ctx.fillRect(x, depth * rowH, rw, rowH - 1);
      }
      canvas.dataset.drawn = String(data.rects.length);
    };
    paint();
    new ResizeObserver(paint).observe(canvas);
    const pick = (ev) => {
      const rect = canvas.getBoundingClientRect();
      const at = ((ev.clientX - rect.left) / rect.width) * data.total;
      const depth = Math.floor(((ev.clientY - rect.top) / rect.height) * data.depth);
      let best = null;
      for (const r of data.rects) {
        if (r[1] <= depth && r[2] <= at && at < r[2] + r[3] && (!best || r[1] > best[1])) best = r;
      }
      return best;
    };
    canvas.addEventListener("mousemove", (ev) => {
      const r = pick(ev);
      canvas.title = r ? `node #${r[0]} (${r[3].toLocaleString()} nodes, ${r[4]}) — click to open` : "";
    });
    canvas.addEventListener("click", (ev) => {
      const r = pick(ev);
      if (r) this.reveal(r[0]);
    });
  }
}

export function mountTrees() {
  for (const root of document.querySelectorAll("[data-search-tree]")) {
    const tree = new SearchTree(root);
    root._tree = tree;
    tree.start().catch((e) => {
      root.dataset.ready = "error";
      tree.say(`Could not load the search tree: ${e.message}`);
    });
  }
}

mountTrees();
