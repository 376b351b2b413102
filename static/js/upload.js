/* The upload form's drop zone: a [data-dropzone] holding an <input type=file> also accepts a
 * file dragged onto it (the input's files are replaced, so the plain form posts it); the chosen
 * file's name shows in its [data-dropzone-file] (as text, never markup). Without JavaScript the
 * file input works as usual. Loaded by the upload page only.
 */
(function () {
  "use strict";

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
})();
