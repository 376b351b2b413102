/* Site behaviour, loaded as a static file so the strict CSP (no inline script) holds.
 *
 * - Marks the page as scripted (`html.js`), which hides the no-JS submit buttons.
 * - Copy buttons: <button data-copy="#selector"> copies the target's text to the clipboard,
 *   with a selection-based fallback where the Clipboard API is unavailable, and announces
 *   the result in the nearest .copy-status (or on the button itself).
 * - Drop zones: a [data-dropzone] holding an <input type=file> also accepts a file dragged
 *   onto it (the input's files are replaced, so the plain form posts it); the chosen file's
 *   name shows in its [data-dropzone-file] (as text, never markup). Without JavaScript the
 *   file input works as usual.
 * - The consensus grid's signer header follows the page scroll (see keepGridHeadsInView).
 */
(function () {
  "use strict";

  document.documentElement.classList.add("js");

  function announce(button, message, ok) {
    var status = button.parentElement && button.parentElement.querySelector(".copy-status");
    var original = button.dataset.label || button.textContent;
    button.dataset.label = original;
    button.textContent = ok ? "Copied" : "Copy failed";
    button.classList.toggle("is-copied", ok);
    if (status) {
      status.textContent = message;
    }
    window.clearTimeout(button._copyTimer);
    button._copyTimer = window.setTimeout(function () {
      button.textContent = original;
      button.classList.remove("is-copied");
      if (status) {
        status.textContent = "";
      }
    }, 2500);
  }

  function copyBySelection(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (err) {
      ok = false;
    }
    return ok;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) {
      return;
    }
    var node = document.querySelector(button.dataset.copy);
    if (!node) {
      return;
    }
    var text = node.textContent.trim();
    var done = function () {
      announce(button, "Copied to the clipboard.", true);
    };
    var fallback = function () {
      if (copyBySelection(node)) {
        done();
      } else {
        announce(button, "Could not copy: the text is selected, press Ctrl+C.", false);
      }
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });

  function showChosen(zone, input) {
    var out = zone.querySelector("[data-dropzone-file]");
    if (!out) {
      return;
    }
    var file = input.files && input.files[0];
    out.textContent = file ? "Selected: " + file.name + " (" + file.size + " bytes)" : "";
  }

  function setUpDropzone(zone) {
    var input = zone.querySelector("input[type=file]");
    if (!input || zone.dataset.dropzoneReady) {
      return;
    }
    zone.dataset.dropzoneReady = "1";
    var depth = 0;
    zone.addEventListener("dragenter", function (event) {
      event.preventDefault();
      depth += 1;
      zone.classList.add("is-dragover");
    });
    zone.addEventListener("dragover", function (event) {
      event.preventDefault();
      if (event.dataTransfer) {
        event.dataTransfer.dropEffect = "copy";
      }
    });
    zone.addEventListener("dragleave", function () {
      depth = Math.max(0, depth - 1);
      if (!depth) {
        zone.classList.remove("is-dragover");
      }
    });
    zone.addEventListener("drop", function (event) {
      event.preventDefault();
      depth = 0;
      zone.classList.remove("is-dragover");
      var files = event.dataTransfer && event.dataTransfer.files;
      if (!files || !files.length) {
        return;
      }
      // Keep exactly one file: the form field takes one.
      var one = new DataTransfer();
      one.items.add(files[0]);
      input.files = one.files;
      input.dispatchEvent(new Event("change", { bubbles: true }));
    });
    input.addEventListener("change", function () {
      showChosen(zone, input);
    });
    showChosen(zone, input);
  }

  function setUpDropzones(root) {
    var zones = (root || document).querySelectorAll("[data-dropzone]");
    Array.prototype.forEach.call(zones, setUpDropzone);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      setUpDropzones(document);
    });
  } else {
    setUpDropzones(document);
  }
  document.addEventListener("htmx:load", function (event) {
    setUpDropzones(event.target);
  });

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
  document.addEventListener("htmx:load", scheduleGridHeads);
  scheduleGridHeads();

  // On a phone the recipe filters fold behind one button (CSS hides them until opened).
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-toggle-filters]");
    if (!button) {
      return;
    }
    var form = button.closest("form");
    var open = form.classList.toggle("is-open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
  });
})();
