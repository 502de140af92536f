/*
 * nboracle-due-dates: the due date of each nbgrader assignment in JupyterLab's Assignment List,
 * and which of a student's submissions came after it.
 *
 * Plain JavaScript with no build step and no import: JupyterLab loads this file as a federated
 * extension (it defines window._JUPYTERLAB["nboracle-due-dates"] with init and get) and activates
 * the plugin below. The plugin reads nbgrader's own listing (GET <base>/assignments?course_id=C),
 * which nboracle.grader.nbgrader_ext.DueDateExchangeList fills with `due_utc` per assignment and
 * `after_due` per submission, and writes them beside the rows nbgrader's panel drew. It changes
 * nothing else: the Fetch, Submit and Validate buttons stay nbgrader's.
 */
(function () {
  "use strict";

  var NAME = "nboracle-due-dates";
  var MARK = "nboracle-due";
  var LISTS = ["released_assignments_list", "fetched_assignments_list", "submitted_assignments_list"];
  var DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  function pageConfig() {
    var element = document.getElementById("jupyter-config-data");
    try {
      return JSON.parse(element ? element.textContent : "{}");
    } catch (error) {
      return {};
    }
  }

  function two(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // "Due Thu 17 Dec 2026, 17:00 UTC (in 13 days)": the time the gradebook holds, in UTC for everyone
  function dueText(iso, now) {
    var due = new Date(iso);
    if (isNaN(due.getTime())) {
      return "";
    }
    var text = "Due " + DAYS[due.getUTCDay()] + " " + two(due.getUTCDate()) + " " + MONTHS[due.getUTCMonth()] +
      " " + due.getUTCFullYear() + ", " + two(due.getUTCHours()) + ":" + two(due.getUTCMinutes()) + " UTC";
    var hours = (due.getTime() - now) / 3600000;
    if (hours <= 0) {
      return text + " (passed)";
    }
    if (hours < 48) {
      var whole = Math.max(1, Math.floor(hours));
      return text + " (in " + whole + (whole === 1 ? " hour)" : " hours)");
    }
    return text + " (in " + Math.floor(hours / 24) + " days)";
  }

  function label(text, extra) {
    var span = document.createElement("span");
    span.className = MARK + (extra ? " " + extra : "");
    span.textContent = text ? " \u00b7 " + text : "";
    span.style.opacity = text ? "0.8" : "";
    return span;
  }

  // the top-level rows of the three lists (each an assignment; nested rows are notebooks or submissions)
  function rows() {
    var found = [];
    LISTS.forEach(function (id) {
      var list = document.getElementById(id);
      if (!list) {
        return;
      }
      Array.prototype.forEach.call(list.children, function (row) {
        if (row.classList.contains("list_item") && row.querySelector(".item_name")) {
          found.push({ list: id, row: row });
        }
      });
    });
    return found;
  }

  function unmarked() {
    return rows().filter(function (r) {
      return !r.row.querySelector(":scope > div > .item_name > ." + MARK);
    });
  }

  function nameOf(row) {
    var name = row.querySelector(":scope > div > .item_name");
    var first = name && name.firstChild;
    return first ? (first.textContent || "").trim() : "";
  }

  function courseOf(row) {
    var course = row.querySelector(":scope > div > .item_course");
    return course ? (course.textContent || "").trim() : "";
  }

  function listing(course) {
    var config = pageConfig();
    var base = config.baseUrl || "/";
    var headers = {};
    if (config.token) {
      headers.Authorization = "token " + config.token;
    }
    return fetch(base + "assignments?course_id=" + encodeURIComponent(course), {
      credentials: "same-origin",
      headers: headers
    }).then(function (reply) {
      return reply.ok ? reply.json() : { success: false };
    }).then(function (body) {
      return body && body.success && Array.isArray(body.value) ? body.value : [];
    }).catch(function () {
      return [];
    });
  }

  function annotate(targets, infos) {
    var now = Date.now();
    var byKey = {};
    infos.forEach(function (info) {
      var key = info.status + "\u0000" + info.course_id + "\u0000" + info.assignment_id;
      byKey[key] = info;
    });
    targets.forEach(function (target) {
      var row = target.row;
      var status = target.list.split("_")[0];
      var info = byKey[status + "\u0000" + courseOf(row) + "\u0000" + nameOf(row)];
      var name = row.querySelector(":scope > div > .item_name");
      if (!name || name.querySelector(":scope > ." + MARK)) {
        return;
      }
      var due = info && typeof info.due_utc === "string" ? info.due_utc : "";
      name.appendChild(label(due ? dueText(due, now) : ""));
      if (status !== "submitted" || !info || !Array.isArray(info.submissions)) {
        return;
      }
      // one nested row per submission, in the listing's order (oldest first)
      var nested = row.querySelectorAll(":scope > .assignment-notebooks > .nested_list_item, " +
        ":scope > .assignment-notebooks > .list_item");
      var submissionRows = Array.prototype.filter.call(nested, function (r) {
        return r.querySelector(".item_name");
      });
      if (submissionRows.length !== info.submissions.length) {
        return;
      }
      submissionRows.forEach(function (r, i) {
        var cell = r.querySelector(".item_name");
        if (info.submissions[i].after_due === true && !cell.querySelector("." + MARK)) {
          cell.appendChild(label("after the due date", MARK + "-after"));
        }
      });
    });
  }

  var running = false;
  var again = false;

  function refresh() {
    if (running) {
      again = true;
      return;
    }
    var targets = unmarked();
    if (!targets.length) {
      return;
    }
    running = true;
    var courses = [];
    targets.forEach(function (t) {
      var course = courseOf(t.row);
      if (course && courses.indexOf(course) < 0) {
        courses.push(course);
      }
    });
    Promise.all(courses.map(listing)).then(function (lists) {
      annotate(targets, [].concat.apply([], lists));
    }).finally(function () {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    });
  }

  var timer = null;

  function schedule() {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(function () {
      timer = null;
      refresh();
    }, 250);
  }

  var plugin = {
    id: NAME + ":plugin",
    description: "Shows each assignment's due date in nbgrader's Assignment List.",
    autoStart: true,
    requires: [],
    activate: function () {
      new MutationObserver(function (mutations) {
        if (!document.getElementById("released_assignments_list")) {
          return; // the Assignment List is not open: Lab's other changes cost one lookup
        }
        for (var i = 0; i < mutations.length; i++) {
          var target = mutations[i].target;
          if (target.nodeType === 1 && target.closest &&
              target.closest("#released_assignments_list, #fetched_assignments_list, #submitted_assignments_list")) {
            schedule();
            return;
          }
        }
      }).observe(document.body, { childList: true, subtree: true });
      schedule();
    }
  };

  var container = {
    init: function () {
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error(NAME + " has no module " + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    }
  };

  var registry = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  registry[NAME] = container;
})();
