/* The recipe page's behaviour. Loaded by that page only.
 *
 * - The consensus grid's signer header follows the page scroll (see keepGridHeadsInView).
 * - The resolved YAML (most of the page's weight, few read it) is fetched when its <details>
 *   is first opened, put in as text (never markup), and its copy button enabled then.
 */
(function () {
  "use strict";

  // The consensus grid's signer header stays in view while the page scrolls past the grid.
  // CSS sticky cannot do it: the grid scrolls sideways in its own box, and a sticky header
  // sticks to that box, not to the page. So the header cells are moved down by what the
  // table's top has scrolled above the viewport, never past the table's last row.
  function keepGridHeadsInView() {
    var grids = document.querySelectorAll(".consensus-grid");
    Array.prototype.forEach.call(grids, function (table) {
      var head = table.tHead;
      if (!head || head.offsetHeight === 0) {
        return; // no header shown (a phone's per-check list)
      }
      var top = table.getBoundingClientRect().top;
      var room = table.offsetHeight - head.offsetHeight;
      var shift = Math.max(0, Math.min(-top, room));
      var transform = shift > 0 ? "translateY(" + shift + "px)" : "";
      Array.prototype.forEach.call(head.querySelectorAll("th"), function (cell) {
        cell.style.transform = transform;
      });
    });
  }

  var headFrame = 0;
  function scheduleGridHeads() {
    if (!headFrame) {
      headFrame = window.requestAnimationFrame(function () {
        headFrame = 0;
        keepGridHeadsInView();
      });
    }
  }
  window.addEventListener("scroll", scheduleGridHeads, { passive: true });
  window.addEventListener("resize", scheduleGridHeads);
  scheduleGridHeads();

  function loadYaml(details) {
    var box = details.querySelector("[data-yaml-src]");
    if (!box || box.dataset.yamlState) {
      return;
    }
    box.dataset.yamlState = "loading";
    var code = box.querySelector("code");
    var button = box.querySelector("[data-copy]");
    code.textContent = "Loading…";
    fetch(box.dataset.yamlSrc, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (text) {
        code.textContent = text;
        box.dataset.yamlState = "loaded";
        button.disabled = false;
      })
      .catch(function (err) {
        code.textContent = "Could not load the YAML (" + err.message + "): open " +
          box.dataset.yamlSrc + " instead.";
        delete box.dataset.yamlState; // opening it again tries again
      });
  }

  document.addEventListener(
    "toggle",
    function (event) {
      if (event.target.open) {
        loadYaml(event.target);
      }
    },
    true // toggle does not bubble
  );
})();
