// Tailor console: renders the model /api/stream pushes (Server-Sent Events), or
// /api/model when streaming is not available. Every text from the cluster goes in
// through textContent or an attribute set by the DOM, never as HTML.
"use strict";

(function () {
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children || []) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function money(x, digits) { return "$" + Number(x || 0).toFixed(digits === undefined ? 4 : digits); }
  function num(x, digits) { return Number(x || 0).toFixed(digits); }
  function age(stamp, now) {
    if (!stamp) return "–";
    let s = Math.max(0, Math.floor((now - Date.parse(stamp)) / 1000));
    if (s < 120) return s + "s";
    let m = Math.floor(s / 60);
    if (m < 120) return m + "m";
    let h = Math.floor(m / 60);
    if (h < 48) return h + "h";
    return Math.floor(h / 24) + "d";
  }
  function bar(used, total, unit, digits) {
    const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
    const fill = el("span", { class: "fill" + (pct > 90 ? " hot" : "") });
    fill.style.width = pct.toFixed(1) + "%";
    return el("div", { class: "barcell" }, [
      el("div", { class: "bar", role: "img", "aria-label": pct.toFixed(0) + "%" }, [fill]),
      el("span", { class: "barlabel", text: num(used, digits) + " / " + num(total, digits) + unit }),
    ]);
  }

  function renderTotals(m) {
    const t = m.totals;
    document.getElementById("total-hour").textContent = money(t.cost_per_hour);
    document.getElementById("total-hour").dataset.value = t.cost_per_hour;
    document.getElementById("total-month").textContent = money(t.cost_per_month, 2);
    let nodes = t.nodes + " priced";
    if (t.unpriced_nodes) nodes += ", " + t.unpriced_nodes + " not";
    if (t.launching_claims) nodes += ", " + t.launching_claims + " launching";
    document.getElementById("total-nodes").textContent = nodes;
    document.getElementById("total-spot").textContent =
      (100 * (t.spot_share || 0)).toFixed(0) + "% of $ (" + t.spot_nodes + " spot nodes)";
    document.getElementById("total-cpu").textContent = num(t.cpu_requested, 2) + " / " + num(t.cpu_allocatable, 2) + " cores";
    document.getElementById("total-memory").textContent = num(t.memory_requested_gib, 1) + " / " + num(t.memory_allocatable_gib, 1) + " GiB";
    document.getElementById("total-pending").textContent = String(t.pending_pods);
  }

  function renderNodes(m, now) {
    const body = document.getElementById("node-rows");
    clear(body);
    for (const n of m.nodes || []) {
      const price = n.unpriced ? el("span", { class: "unpriced", title: n.unpriced, text: "?" }) : money(n.price_per_hour);
      const state = el("span", { class: "state state-" + n.state, text: n.state });
      const stateCell = el("td", { class: "state-cell" }, [state]);
      if (n.consolidatable) stateCell.appendChild(el("span", { class: "state state-consolidatable", text: "consolidatable" }));
      if (n.state_reason) stateCell.appendChild(el("div", { class: "reason", text: n.state_reason }));
      const priceCell = el("td", { class: "num price" }, [price]);
      if (!n.unpriced) {
        priceCell.dataset.value = n.price_per_hour;
        priceCell.title = "instance " + money(n.instance) + ", volumes " + money(n.volumes) + ", addresses " + money(n.addresses) +
          ", per-node " + money(n.per_node) + "; idle " + money(n.idle_per_hour) + " (" + money(n.price_per_month, 2) + "/month)";
      }
      const row = el("tr", { "data-node": n.node }, [
        el("td", { class: "name", text: n.node, title: n.node_claim ? "NodeClaim " + n.node_claim : "no NodeClaim" }),
        el("td", { text: n.node_pool || "–" }),
        el("td", { text: n.instance_type || "–" }),
        el("td", { text: n.zone || "–" }),
        el("td", { text: n.capacity_type || "–" }),
        priceCell,
        el("td", {}, [bar(n.cpu_requested, n.cpu_allocatable, "", 2)]),
        el("td", {}, [bar(n.memory_requested_gib, n.memory_allocatable_gib, " GiB", 1)]),
        el("td", { class: "num", text: String(n.pods) }),
        el("td", { class: "num", text: age(n.created, now) }),
        stateCell,
      ]);
      body.appendChild(row);
    }
    if (!(m.nodes || []).length) body.appendChild(el("tr", {}, [el("td", { colspan: 11, class: "empty", text: "no nodes" })]));
  }

  function renderPending(m) {
    const list = document.getElementById("pending-list");
    clear(list);
    for (const p of m.pending || []) {
      const reasons = el("ul", { class: "reasons" });
      for (const r of p.reasons || []) {
        const li = el("li", { class: "reason" }, [
          el("strong", { text: r.node_pool ? "NodePool " + r.node_pool + ": " : "" }),
          el("span", { class: "why", text: r.reason }),
        ]);
        if (r.fix) li.appendChild(el("div", { class: "fix", text: "to fit: " + r.fix }));
        reasons.appendChild(li);
      }
      const card = el("div", { class: "card", "data-pod": p.namespace + "/" + p.name }, [
        el("h3", { text: p.namespace + "/" + p.name }),
        el("p", { class: "plan", text: p.plan }),
        reasons,
      ]);
      if (p.last_event) {
        const e = p.last_event;
        card.appendChild(el("p", { class: "event" }, [
          el("span", { class: "muted", text: (e.time || "") + " " + e.type + " " + e.reason + " (" + (e.from || "?") + "): " }),
          el("span", { class: "message", text: e.message }),
        ]));
      }
      list.appendChild(card);
    }
    if (!(m.pending || []).length) list.appendChild(el("p", { class: "empty", text: "no pending pods" }));
  }

  function renderDecisions(m) {
    const body = document.getElementById("decision-rows");
    clear(body);
    for (const d of m.decisions || []) {
      const obj = d.kind + " " + (d.namespace ? d.namespace + "/" : "") + d.name;
      body.appendChild(el("tr", { class: "cat-" + d.category + (d.type === "Warning" ? " warning" : "") }, [
        el("td", { class: "time", text: d.time || "–" }),
        el("td", { text: d.category }),
        el("td", { class: "reason", text: d.reason + (d.count > 1 ? " ×" + d.count : "") }),
        el("td", { class: "object", text: obj }),
        el("td", { class: "message", text: d.message }),
      ]));
    }
    if (!(m.decisions || []).length) body.appendChild(el("tr", {}, [el("td", { colspan: 5, class: "empty", text: "no events from Tailor" })]));
  }

  function renderCostTable(id, lines, idle, total) {
    const body = document.querySelector("#" + id + " tbody");
    clear(body);
    for (const l of (lines || []).concat([idle])) {
      const share = total > 0 ? (100 * l.cost_per_hour) / total : 0;
      const hour = el("td", { class: "num per-hour", text: money(l.cost_per_hour) });
      hour.dataset.value = l.cost_per_hour;
      body.appendChild(el("tr", { "data-name": l.name, class: l === idle ? "idle" : "" }, [
        el("td", { class: "name", text: l.name }),
        el("td", { class: "num", text: String(l.pods) }),
        el("td", { class: "num", text: num(l.cpu, 3) }),
        el("td", { class: "num", text: num(l.memory_gib, 2) + " GiB" }),
        hour,
        el("td", { class: "num", text: money(l.cost_per_month, 2) }),
        el("td", { class: "num", text: share.toFixed(1) + "%" }),
      ]));
    }
  }

  function renderCost(m) {
    renderCostTable("cost-nodepool", m.cost.by_nodepool, m.cost.idle, m.totals.cost_per_hour);
    renderCostTable("cost-namespace", m.cost.by_namespace, m.cost.idle, m.totals.cost_per_hour);
    document.getElementById("cost-basis").textContent =
      "Each node's price shared among its pods as tailor cost allocates it: a pod pays for the larger of its requests and its usage (" +
      m.cost.usage + "); the room no pod takes is the idle line.";
  }

  function renderNotes(m) {
    const ul = document.getElementById("notes");
    clear(ul);
    for (const n of m.notes || []) ul.appendChild(el("li", { text: n }));
    document.getElementById("notes-section").hidden = !(m.notes || []).length;
  }

  function render(m) {
    const now = Date.now();
    renderTotals(m);
    renderNodes(m, now);
    renderPending(m);
    renderDecisions(m);
    renderCost(m);
    renderNotes(m);
    const status = document.getElementById("status");
    status.textContent = "live · updated " + new Date(m.generated).toLocaleTimeString();
    status.className = "status live";
    document.body.dataset.generated = m.generated;
    document.body.dataset.ready = "true";
  }

  function failed(msg) {
    const status = document.getElementById("status");
    status.textContent = msg;
    status.className = "status failed";
  }

  function poll() {
    fetch("api/model", { cache: "no-store" })
      .then((r) => (r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t)))))
      .then(render, (e) => failed(String(e.message || e)))
      .finally(() => setTimeout(poll, 5000));
  }

  if (window.EventSource) {
    const es = new EventSource("api/stream");
    es.addEventListener("model", (ev) => render(JSON.parse(ev.data)));
    es.addEventListener("failure", (ev) => failed(JSON.parse(ev.data)));
    es.onerror = () => failed("disconnected: retrying…");
  } else {
    poll();
  }
})();
