// Upload progress for the snapshot form (a big snapshot takes a while to send): the form is
// sent with XMLHttpRequest so that the bytes sent can be shown, then the server's answer is
// followed as a normal submit would be (the snapshot page on success, the dashboard with the
// problems on a 400).
// Include with <script src="{% static 'js/upload.js' %}" defer></script>; it acts on
// <form id="upload-form"> or any form with data-upload-progress. Without JavaScript the form
// posts as before.
(function () {
  "use strict";

  function megabytes(bytes) {
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  function indicator(form) {
    var box = form.querySelector("[data-upload-status]");
    if (!box) {
      box = document.createElement("div");
      box.setAttribute("data-upload-status", "");
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      box.className = "upload-status";
      var bar = document.createElement("progress");
      bar.max = 100;
      bar.value = 0;
      var text = document.createElement("span");
      text.className = "muted";
      box.appendChild(bar);
      box.appendChild(document.createTextNode(" "));
      box.appendChild(text);
      form.appendChild(box);
    }
    return {
      box: box,
      bar: box.querySelector("progress"),
      text: box.querySelector("span"),
    };
  }

  function showPage(xhr) {
    // Follow the answer like a browser submit: a redirect lands on responseURL; an error page
    // replaces this one (it carries the problems and the form again).
    var type = xhr.getResponseHeader("Content-Type") || "";
    if (xhr.status >= 200 && xhr.status < 300 && xhr.responseURL &&
        xhr.responseURL !== window.location.href) {
      window.location.assign(xhr.responseURL);
      return;
    }
    if (type.indexOf("text/html") === 0) {
      document.open();
      document.write(xhr.responseText);
      document.close();
      return;
    }
    var message = xhr.responseText;
    try {
      message = JSON.parse(xhr.responseText).detail || message;
    } catch (e) { /* plain text */ }
    window.alert("Upload failed (" + xhr.status + "): " + message);
  }

  function attach(form) {
    form.addEventListener("submit", function (event) {
      if (!window.FormData || !window.XMLHttpRequest) return;
      event.preventDefault();
      var ui = indicator(form);
      var buttons = form.querySelectorAll("button[type=submit], input[type=submit]");
      buttons.forEach(function (b) { b.disabled = true; });
      var xhr = new XMLHttpRequest();
      xhr.open(form.method || "POST", form.action);
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) {
          ui.bar.max = e.total;
          ui.bar.value = e.loaded;
          ui.text.textContent = megabytes(e.loaded) + " of " + megabytes(e.total) + " sent";
        } else {
          ui.bar.removeAttribute("value");
          ui.text.textContent = megabytes(e.loaded) + " sent";
        }
      });
      xhr.upload.addEventListener("load", function () {
        ui.bar.removeAttribute("value"); // indeterminate while the server parses
        ui.text.textContent = "sent; the server is reading the snapshot…";
      });
      xhr.addEventListener("load", function () { showPage(xhr); });
      xhr.addEventListener("error", function () {
        buttons.forEach(function (b) { b.disabled = false; });
        ui.text.textContent = "the upload did not reach the server; try again";
      });
      xhr.send(new FormData(form));
    });
  }

  function init() {
    document.querySelectorAll("form#upload-form, form[data-upload-progress]").forEach(attach);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
