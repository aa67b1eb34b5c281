// Sortable tables (every page of a report folder): a click on a header sorts by that column, numbers by their
// data-v, the rest as text, missing values last. Hand-written: a dozen lines of page glue.
"use strict";
(function () {
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.tHead.rows[0].cells;
    Array.from(heads).forEach((th, col) => th.addEventListener("click", () => {
      const dir = th.dataset.dir === "asc" ? "desc" : "asc";
      Array.from(heads).forEach((h) => delete h.dataset.dir);
      th.dataset.dir = dir;
      const key = (tr) => {
        const td = tr.cells[col];
        if (td.dataset.v !== undefined) return Number(td.dataset.v);
        return td.textContent === "—" ? null : td.textContent;
      };
      const rows = Array.from(table.tBodies[0].rows);
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || y === null) return (x === null) - (y === null);
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return dir === "asc" ? c : -c;
      });
      rows.forEach((r) => table.tBodies[0].appendChild(r));
    }));
  }

})();
