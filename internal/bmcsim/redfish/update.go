package redfish

import (
	"net/http"
	"slices"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

const (
	updatePath       = "/redfish/v1/UpdateService"
	inventoryPath    = updatePath + "/FirmwareInventory"
	simpleUpdatePath = updatePath + "/Actions/UpdateService.SimpleUpdate"
	taskServicePath  = "/redfish/v1/TaskService"
	tasksPath        = taskServicePath + "/Tasks"
	taskMonitorsPath = taskServicePath + "/TaskMonitors"
)

func (svc *Service) updateRoutes() {
	svc.route("GET "+updatePath, false, func(q *request) {
		q.json(http.StatusOK, M{
			"@odata.id":         updatePath,
			"@odata.type":       "#UpdateService.v1_14_0.UpdateService",
			"Id":                "UpdateService",
			"Name":              "Update Service",
			"ServiceEnabled":    true,
			"Status":            statusOK,
			"FirmwareInventory": ref(inventoryPath),
			"Actions": M{"#UpdateService.SimpleUpdate": M{
				"target": simpleUpdatePath,
			}},
		})
	})
	svc.route("GET "+inventoryPath, false, func(q *request) {
		var members []string
		for _, c := range server.Components {
			members = append(members, inventoryPath+"/"+c)
		}
		q.json(http.StatusOK, collection(inventoryPath, "#SoftwareInventoryCollection.SoftwareInventoryCollection", "Firmware Inventory Collection", members))
	})
	svc.route("GET "+inventoryPath+"/{c}", false, func(q *request) {
		c := q.r.PathValue("c")
		if !slices.Contains(server.Components, c) {
			q.notFound()
			return
		}
		q.json(http.StatusOK, svc.inventoryBody(q.srv, c))
	})
	svc.route("POST "+simpleUpdatePath, false, func(q *request) {
		var body struct {
			ImageURI         string
			TransferProtocol string
			Targets          []string
		}
		if !q.decode(&body, false) {
			return
		}
		if body.ImageURI == "" {
			q.error(http.StatusBadRequest, "ActionParameterMissing", "The action UpdateService.SimpleUpdate requires the parameter ImageURI to be present in the request body.", "UpdateService.SimpleUpdate", "ImageURI")
			return
		}
		id, err := q.srv.SimpleUpdate(server.UpdateRequest{
			ImageURI: body.ImageURI, TransferProtocol: body.TransferProtocol, Targets: body.Targets, TargetURI: simpleUpdatePath,
		})
		if err != nil {
			q.fail(err)
			return
		}
		q.accepted(id)
	})
}

func (svc *Service) inventoryBody(s *server.Server, c string) M {
	p := &svc.fleet.Config().Profile
	var v server.Versions
	s.View(func(st *server.State) { v = st.Firmware })
	body := M{
		"@odata.id":    inventoryPath + "/" + c,
		"@odata.type":  "#SoftwareInventory.v1_10_0.SoftwareInventory",
		"Id":           c,
		"Updateable":   true,
		"Manufacturer": p.Manufacturer,
		"Status":       statusOK,
	}
	switch c {
	case server.ComponentBIOS:
		body["Name"], body["Version"], body["SoftwareId"] = "System BIOS", v.BIOS, "SIM-BIOS"
		body["RelatedItem"] = refs(sysPath(s))
	case server.ComponentBMC:
		body["Name"], body["Version"], body["SoftwareId"] = "BMC Firmware", v.BMC, "SIM-BMC"
		body["RelatedItem"] = refs(managerPath(s))
	case server.ComponentNIC:
		body["Name"], body["Version"], body["SoftwareId"] = "Network Adapter Firmware", v.NIC, "SIM-NIC"
		body["RelatedItem"] = refs(chassisOf(s) + "/NetworkAdapters/" + adapterID)
	}
	return body
}

// accepted answers an asynchronous operation: 202 with the task monitor in Location and the Task
// in the body. sushy then polls the Task's own URI (it prefers the body's @odata.id), gofish the
// monitor; both answer 202 while the task runs.
func (q *request) accepted(taskID string) {
	t, ok := q.srv.Task(taskID)
	if !ok {
		q.error(http.StatusInternalServerError, "InternalError", "The task was lost.")
		return
	}
	q.w.Header().Set("Location", taskMonitorsPath+"/"+taskID)
	q.json(http.StatusAccepted, taskBody(t))
}

func (svc *Service) taskRoutes() {
	svc.route("GET "+taskServicePath, false, func(q *request) {
		q.json(http.StatusOK, M{
			"@odata.id":                       taskServicePath,
			"@odata.type":                     "#TaskService.v1_2_1.TaskService",
			"Id":                              "TaskService",
			"Name":                            "Task Service",
			"ServiceEnabled":                  true,
			"CompletedTaskOverWritePolicy":    "Oldest",
			"LifeCycleEventOnTaskStateChange": false,
			"Status":                          statusOK,
			"Tasks":                           ref(tasksPath),
		})
	})
	svc.route("GET "+tasksPath, false, func(q *request) {
		var members []string
		q.srv.View(func(st *server.State) {
			for _, t := range st.Tasks {
				members = append(members, tasksPath+"/"+t.ID)
			}
		})
		q.json(http.StatusOK, collection(tasksPath, "#TaskCollection.TaskCollection", "Task Collection", members))
	})
	// Both the Task and its monitor answer 202 while the task runs and 200 once it finished.
	task := func(q *request) {
		t, ok := q.srv.Task(q.r.PathValue("id"))
		if !ok {
			q.notFound()
			return
		}
		status := http.StatusOK
		if !t.Done() {
			status = http.StatusAccepted
			q.w.Header().Set("Location", taskMonitorsPath+"/"+t.ID)
		}
		q.json(status, taskBody(t))
	}
	svc.route("GET "+tasksPath+"/{id}", false, task)
	svc.route("GET "+taskMonitorsPath+"/{id}", false, task)
}

func taskBody(t server.Task) M {
	msgs := make([]M, 0, len(t.Messages))
	for _, m := range t.Messages {
		args := m.Args
		if args == nil {
			args = []string{}
		}
		msgs = append(msgs, M{
			"@odata.type":     "#Message.v1_2_0.Message",
			"MessageId":       m.ID,
			"Message":         m.Message,
			"MessageArgs":     args,
			"MessageSeverity": m.Severity,
			"Severity":        m.Severity,
		})
	}
	body := M{
		"@odata.id":       tasksPath + "/" + t.ID,
		"@odata.type":     "#Task.v1_7_4.Task",
		"Id":              t.ID,
		"Name":            t.Name,
		"TaskState":       t.State,
		"TaskStatus":      t.Status,
		"PercentComplete": t.Percent,
		"StartTime":       t.Start.UTC().Format(time.RFC3339),
		"TaskMonitor":     taskMonitorsPath + "/" + t.ID,
		"Messages":        msgs,
		"Payload": M{
			"TargetUri":     t.TargetURI,
			"HttpOperation": t.Method,
			"HttpHeaders":   []string{},
		},
	}
	if !t.End.IsZero() {
		body["EndTime"] = t.End.UTC().Format(time.RFC3339)
	}
	return body
}
