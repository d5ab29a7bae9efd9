package main

import (
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
)

type serviceClient = gophercloud.ServiceClient

func isConflict(err error) bool { return gophercloud.ResponseCodeIs(err, http.StatusConflict) }
