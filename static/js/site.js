/* Site behaviour, loaded as a static file so the strict CSP (no inline script) holds.
 *
 * - Nothing here decides what shows with scripts on: CSS does, at first paint
 *   (`@media (scripting: enabled)`); a class set from here came after the paint and moved
 *   the page (the recipe list's layout shift, docs/benchmarks.md).
 * - Copy buttons: <button data-copy="#selector"> copies the target's text to the clipboard,
 *   with a selection-based fallback where the Clipboard API is unavailable, and announces
 *   the result in the nearest .copy-status (or on the button itself).
 * - On a phone the recipe filters fold behind one button ([data-toggle-filters]).
 *
 * What one page alone needs is in that page's own script (upload.js, recipe.js), so every page
 * does not pay for it (the 100 KB budget, docs/benchmarks.md).
 */
(function () {
  "use strict";

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
