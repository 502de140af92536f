/*
 * The course's changes to nbgrader 0.9.6's Manage Assignments page (nboracle.grader.formgrader adds
 * this script after nbgrader's manage_assignments.js, with `nboracle_course_zone` set before it):
 *
 * - the due-date dialogs' zone field says the course's time zone (c.NbGraderAPI.timezone, e.g.
 *   Asia/Ho_Chi_Minh) and is pre-filled with it, not with today's UTC offset of it;
 * - a save the server refuses (a date or zone it cannot read) says why in the dialog and leaves the
 *   Save button usable, instead of "Saving..." for ever; nothing is changed by a refused save;
 * - Unrelease (the Release column's second state, where a second click of Release lands) asks first:
 *   a student who has not fetched the assignment would lose it until it is released again.
 */
(function () {
  "use strict";

  var zone = typeof nboracle_course_zone === "string" ? nboracle_course_zone : "";
  var ZONE_LABEL = "Time zone (" + (zone ? "the course's: " + zone : "the course's") +
    "; or a name like Asia/Ho_Chi_Minh, or an offset like +0700)";

  function zoneField(input) {
    input.closest("tr").find("td").first().text(ZONE_LABEL);
    input.attr("placeholder", zone || "Asia/Ho_Chi_Minh").attr("size", "31").val(zone);
  }

  function reason(xhr) {
    var body = xhr && xhr.responseJSON;
    if (!body && xhr && xhr.responseText) {
      try {
        body = JSON.parse(xhr.responseText);
      } catch (error) {
        body = null;
      }
    }
    if (body && body.message) {
      return body.message;
    }
    return "the server answered " + (xhr ? xhr.status + " " + (xhr.statusText || "") : "nothing") +
      ": nothing was saved";
  }

  function showError(modal, text) {
    var box = modal.find(".nboracle-save-error");
    if (!box.length) {
      box = $("<p/>").addClass("alert alert-danger nboracle-save-error");
      modal.find(".modal-body").prepend(box);
    }
    box.text(text).show();
  }

  var ui = AssignmentUI.prototype;

  var openModal = ui.openModal;
  ui.openModal = function () {
    openModal.apply(this, arguments);
    zoneField(this.$modal_timezone);
  };

  ui.save = function () {
    var view = this;
    var duedate = this.$modal_duedate.val();
    var timezone = this.$modal_timezone.val();
    if (duedate === "") {
      duedate = null;
      timezone = null;
    }
    this.model.save({ "duedate_notimezone": duedate, "duedate_timezone": timezone }, {
      wait: true,  // the row keeps what the gradebook holds until the server said yes
      error: function (model, xhr) {
        if (view.$modal) {
          view.$modal_save.text("Save");
          showError(view.$modal, reason(xhr));
        } else {
          createModal("error-modal", "Error", "The due date of '" + model.get("name") + "' was not saved: " +
            reason(xhr));
        }
      }
    });
  };

  var unrelease = ui.unrelease;
  ui.unrelease = function () {
    var name = this.model.get("name");
    if (!window.confirm("Unrelease '" + name + "'? Students who have not fetched it yet will not see it " +
        "until you release it again (fetched copies and submissions stay).")) {
      return false;
    }
    return unrelease.apply(this, arguments);
  };

  // "Add new assignment": the same zone field, and a refused save said (the new row is dropped)
  var createAssignmentModalOf = createAssignmentModal;
  createAssignmentModal = function () {
    createAssignmentModalOf.apply(this, arguments);
    zoneField($("#add-assignment-modal input.timezone"));
  };
  $(window).on("load", function () {
    if (!models) {
      return;
    }
    models.on("error", function (model, xhr, options) {
      if (options && options.error && options.wait) {
        return;  // an Edit dialog's save: told in the dialog
      }
      createModal("error-modal", "Error", "'" + model.get("name") + "' was not saved: " + reason(xhr) +
        " (reload the page to see the assignments as they are)");
    });
  });
})();
