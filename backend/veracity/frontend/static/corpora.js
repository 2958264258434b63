// Drag and drop onto the upload form's drop zone (the plain file input works without this), and the chosen names.
(function () {
  "use strict";
  function init() {
    var zone = document.getElementById("dropzone");
    var input = document.getElementById("files");
    var shown = document.getElementById("chosen-files");
    if (!zone || !input) return;
    function list() {
      var names = Array.prototype.map.call(input.files, function (f) { return f.name; });
      if (shown) shown.textContent = names.length ? names.length + " chosen: " + names.join(", ") : "";
    }
    input.addEventListener("change", list);
    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (e) { e.preventDefault(); zone.classList.add("dragging"); });
    });
    ["dragleave", "drop"].forEach(function (name) {
      zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
    });
    zone.addEventListener("drop", function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; list(); }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
