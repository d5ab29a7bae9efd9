package redfish

import (
	"net/http"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// Resource paths.
const (
	rootPath     = "/redfish/v1"
	systemsPath  = "/redfish/v1/Systems"
	managersPath = "/redfish/v1/Managers"
	chassisPath  = "/redfish/v1/Chassis"
)

// serviceUUID identifies the Redfish service (the shared listener).
const serviceUUID = "6d6f6b00-6d66-4f00-8000-626d6373696d"

var statusOK = M{"State": "Enabled", "Health": "OK"}

func ref(id string) M { return M{"@odata.id": id} }

func refs(ids ...string) []M {
	out := make([]M, len(ids))
	for i, id := range ids {
		out[i] = ref(id)
	}
	return out
}

func collection(id, typ, name string, members []string) M {
	return M{
		"@odata.id":           id,
		"@odata.type":         typ,
		"Name":                name,
		"Members":             refs(members...),
		"Members@odata.count": len(members),
	}
}

func sysPath(s *server.Server) string     { return systemsPath + "/" + s.ID() }
func managerPath(s *server.Server) string { return managersPath + "/" + s.ID() }
func chassisOf(s *server.Server) string   { return chassisPath + "/" + s.ID() }

// owns checks that the {id} path segment names the caller's own server; other servers' resources
// do not exist for this caller.
func (q *request) owns(param string) bool {
	if q.r.PathValue(param) != q.srv.ID() {
		q.notFound()
		return false
	}
	return true
}

func (svc *Service) routes() {
	svc.route("GET /redfish", true, func(q *request) {
		q.json(http.StatusOK, M{"v1": "/redfish/v1/"})
	})
	svc.route("GET /redfish/v1", true, func(q *request) { q.json(http.StatusOK, serviceRoot()) })
	svc.route("GET /redfish/v1/odata", true, func(q *request) {
		var values []M
		for _, n := range []string{"Systems", "Managers", "Chassis", "SessionService", "UpdateService", "TaskService", "EventService", "Registries"} {
			values = append(values, M{"name": n, "kind": "Singleton", "url": rootPath + "/" + n})
		}
		q.json(http.StatusOK, M{"@odata.context": "/redfish/v1/$metadata", "value": values})
	})
	svc.sessionRoutes()
	svc.systemRoutes()
	svc.storageRoutes()
	svc.biosRoutes()
	svc.managerRoutes()
	svc.chassisRoutes()
	svc.updateRoutes()
	svc.taskRoutes()
	svc.eventRoutes()
}

func serviceRoot() M {
	return M{
		"@odata.id":      rootPath,
		"@odata.type":    "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "Root Service",
		"RedfishVersion": "1.20.0",
		"UUID":           serviceUUID,
		"Product":        "Metalforge bmcsim",
		"Vendor":         "Metalforge",
		"ProtocolFeaturesSupported": M{
			"ExpandQuery":     M{"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
			"FilterQuery":     false,
			"SelectQuery":     false,
			"OnlyMemberQuery": false,
			"ExcerptQuery":    false,
		},
		"Systems":        ref(systemsPath),
		"Managers":       ref(managersPath),
		"Chassis":        ref(chassisPath),
		"SessionService": ref("/redfish/v1/SessionService"),
		"UpdateService":  ref(updatePath),
		"Tasks":          ref(taskServicePath), // ServiceRoot names the TaskService link "Tasks"
		"EventService":   ref(eventServicePath),
		"Registries":     ref(registriesPath),
		"Links":          M{"Sessions": ref(sessionsPath)},
	}
}
